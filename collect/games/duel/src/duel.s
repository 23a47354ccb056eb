; DUEL: a two-player fighting game for the NES (NROM-256), written for wantofight.
;
; Frame loop: the main loop waits for NMI, reads both pads, runs one frame of game logic and
; builds the sprite (OAM) and HUD buffers; the next NMI copies them to the PPU. So RAM for
; frame N is on screen one frame later (measured, see docs/duel.md).
;
; Every per-player variable is a 2-byte array indexed by X (0 = P1, 1 = P2); data.json is
; generated from the linker's label file, so the addresses below are the RAM contract.

.include "rules.inc"

PPUCTRL   = $2000
PPUMASK   = $2001
PPUSTATUS = $2002
OAMADDR   = $2003
PPUSCROLL = $2005
PPUADDR   = $2006
PPUDATA   = $2007
OAMDMA    = $4014
JOY1      = $4016
JOY2      = $4017

; pad bits after 8 reads shifted in with ROL: A B Select Start Up Down Left Right
BTN_A      = $80
BTN_B      = $40
BTN_UP     = $08
BTN_DOWN   = $04
BTN_LEFT   = $02
BTN_RIGHT  = $01

; mv_flags bits (from game.json)
FL_KNOCKDOWN = $01
FL_CROUCH    = $02
FL_HIGH      = $04          ; must be blocked standing
FL_LOW       = $08          ; must be blocked crouching
FL_AIR       = $10

CTRL_VALUE = %10100000      ; NMI on, 8x16 sprites, background tiles from $0000
FALL_SPEED = 4              ; px per frame a knocked-down fighter drops to the floor
SPARK_FRAMES = 10
WIN_POSE_AT = 90            ; round-over frame at which the winner strikes a pose
MSG_COL = 16                ; messages are centred on this column
IDLE_LOOP_Y = 57            ; 14 + 5*57 = 299 cycles per idle iteration, ~1% of a frame

.segment "HEADER"
    .byte "NES", $1A, 2, 1, $01, $00, 0, 0, 0, 0, 0, 0, 0, 0

; ---------------------------------------------------------------------------------------------
; RAM
.segment "ZEROPAGE"
t0:         .res 1
t1:         .res 1
t2:         .res 1
t3:         .res 1
t4:         .res 1
t5:         .res 1
t6:         .res 1
t7:         .res 1
ptr:        .res 2
; the RAM contract (exported through data.json)
p_x:        .res 2          ; fighter centre, screen px
p_y:        .res 2          ; feet, screen line (GROUND_Y when standing)
p_facing:   .res 2          ; 0 right, 1 left
p_health:   .res 2
p_state:    .res 2          ; ST_*
p_wins:     .res 2
p_move:     .res 2          ; MV_* while attacking, else 0
p_stun:     .res 2          ; hitstun / blockstun frames left
round_no:   .res 1          ; 1-based
timer:      .res 1          ; seconds left
phase:      .res 1          ; PH_*
match_over: .res 1
frame:      .res 2          ; logic frames since power-on
cpu_load:   .res 1          ; % of the previous frame the CPU was busy
p_dealt:    .res 4          ; damage dealt this match, 16-bit, P1 then P2 (for rewards)
; internal
p_timer:    .res 2          ; frames since the current state began
p_air:      .res 2          ; jump frame (1..JUMP_FRAMES), 0 on the ground
p_jdx:      .res 2          ; x speed during a jump, signed
p_push:     .res 2          ; pushback px still to travel
p_pushdir:  .res 2          ; 1 right, $FF left
p_hitdone:  .res 2          ; the current attack has connected
p_airused:  .res 2          ; an air attack was used in this jump
pad:        .res 2
pad_prev:   .res 2
pad_new:    .res 2
hit_kind:   .res 2          ; per defender this frame: 0 none, 1 hit, 2 blocked
hit_move:   .res 2
hit_dir:    .res 2          ; the attacker's facing
timer_sub:  .res 1
phase_timer: .res 1
round_winner: .res 1        ; bit 0 P1 won the round, bit 1 P2 won
round_ko:   .res 1          ; the round ended by KO (else time-out)
spark_x:    .res 1
spark_y:    .res 1
spark_t:    .res 1
nmi_count:  .res 1
last_nmi:   .res 1
nmi_ready:  .res 1
oam_i:      .res 1

.segment "OAM"
oam_buf:    .res 256

.segment "BSS"
hud_buf:    .res 64         ; nametable rows 3 and 4
msg_buf:    .res 32         ; nametable row 12

; ---------------------------------------------------------------------------------------------
.segment "CODE"

reset:
    sei
    cld
    ldx #$40
    stx $4017               ; no APU frame IRQ
    ldx #$FF
    txs
    inx
    stx PPUCTRL
    stx PPUMASK
    stx $4010
    bit PPUSTATUS
@vb1:
    bit PPUSTATUS
    bpl @vb1
    txa
@clear:
    sta $0000,x
    sta $0100,x
    sta $0300,x
    sta $0400,x
    sta $0500,x
    sta $0600,x
    sta $0700,x
    inx
    bne @clear
    lda #$FF
@hide:
    sta oam_buf,x
    inx
    bne @hide
@vb2:
    bit PPUSTATUS
    bpl @vb2

    lda #$3F
    sta PPUADDR
    lda #$00
    sta PPUADDR
    ldx #0
@pal:
    lda palettes,x
    sta PPUDATA
    inx
    cpx #32
    bne @pal

    lda #$20
    sta PPUADDR
    lda #$00
    sta PPUADDR
    lda #<stage
    sta ptr
    lda #>stage
    sta ptr+1
    ldx #4
    ldy #0
@nt:
    lda (ptr),y
    sta PPUDATA
    iny
    bne @nt
    inc ptr+1
    dex
    bne @nt

    jsr new_match
    jsr draw
    lda #0
    sta PPUSCROLL
    sta PPUSCROLL
    lda #CTRL_VALUE
    sta PPUCTRL
    lda #%00011110          ; background and sprites, left 8 px included
    sta PPUMASK
    lda #1
    sta nmi_ready
    lda nmi_count
    sta last_nmi

main_loop:
    ; Idle until NMI, counting ~1%-of-a-frame iterations: cpu_load = 100 - count.
    ldx #0
@wait:
    lda nmi_count
    cmp last_nmi
    bne @woke
    ldy #IDLE_LOOP_Y
@delay:
    dey
    bne @delay
    inx
    bne @wait
    dex
    jmp @wait
@woke:
    sta last_nmi
    stx t0
    lda #100
    sec
    sbc t0
    bcs :+
    lda #0
:   sta cpu_load
    jsr read_pads
    jsr update
    jsr draw
    lda #1
    sta nmi_ready
    jmp main_loop

nmi:
    pha
    txa
    pha
    tya
    pha
    lda nmi_ready
    bne :+
    jmp @skip
:
    lda #0
    sta OAMADDR
    lda #>oam_buf
    sta OAMDMA
    lda #$20
    sta PPUADDR
    lda #$60
    sta PPUADDR
.repeat 64, I
    lda hud_buf+I
    sta PPUDATA
.endrepeat
    lda #$21
    sta PPUADDR
    lda #$80
    sta PPUADDR
.repeat 32, I
    lda msg_buf+I
    sta PPUDATA
.endrepeat
    lda #0
    sta PPUSCROLL
    sta PPUSCROLL
    lda #CTRL_VALUE
    sta PPUCTRL
    lda #0
    sta nmi_ready
@skip:
    inc nmi_count
    pla
    tay
    pla
    tax
    pla
irq:
    rti

read_pads:
    lda pad
    sta pad_prev
    lda pad+1
    sta pad_prev+1
    lda #1
    sta JOY1
    lda #0
    sta JOY1
    ldx #8
@bit:
    lda JOY1
    lsr a
    rol pad
    lda JOY2
    lsr a
    rol pad+1
    dex
    bne @bit
    ldx #1
@new:
    lda pad_prev,x
    eor #$FF
    and pad,x
    sta pad_new,x
    dex
    bpl @new
    rts

; ---------------------------------------------------------------------------------------------
; Match and round flow

new_match:
    lda #1
    sta round_no
    lda #0
    sta p_wins
    sta p_wins+1
    sta match_over
    ; fall through
reset_round:
    ldx #1
@each:
    lda #GROUND_Y
    sta p_y,x
    lda #HEALTH_MAX
    sta p_health,x
    lda #ST_IDLE
    sta p_state,x
    lda #0
    sta p_move,x
    sta p_stun,x
    sta p_timer,x
    sta p_air,x
    sta p_jdx,x
    sta p_push,x
    sta p_hitdone,x
    sta p_airused,x
    sta hit_kind,x
    dex
    bpl @each
    lda #START_X1
    sta p_x
    lda #START_X2
    sta p_x+1
    lda #FACING_RIGHT
    sta p_facing
    lda #FACING_LEFT
    sta p_facing+1
    lda #ROUND_TIME
    sta timer
    lda #0
    sta timer_sub
    sta phase_timer
    sta spark_t
    sta round_winner
    sta round_ko
    lda #PH_INTRO
    sta phase
    rts

update:
    inc frame
    bne :+
    inc frame+1
:   lda spark_t
    beq :+
    dec spark_t
:   lda phase
    cmp #PH_INTRO
    beq do_intro
    cmp #PH_FIGHTING
    beq do_fight
    cmp #PH_ROUND_OVER
    bne :+
    jmp do_round_over
:   rts

do_intro:
    inc phase_timer
    lda phase_timer
    cmp #INTRO_FRAMES
    bcc :+
    lda #PH_FIGHTING
    sta phase
    lda #0
    sta phase_timer
:   rts

do_fight:
    inc phase_timer
    bne :+
    dec phase_timer
:   jsr step_fighters
    ; both hits are found before either is applied, so trades are symmetric
    ldx #0
    jsr check_hit
    ldx #1
    jsr check_hit
    ldx #0
    jsr apply_hit
    ldx #1
    jsr apply_hit
    jmp check_round_end

step_fighters:
    ldx #0
    jsr fighter_control
    ldx #1
    jsr fighter_control
    ldx #0
    jsr guard_pass
    ldx #1
    jsr guard_pass
    ldx #0
    jsr fighter_physics
    ldx #1
    jsr fighter_physics
    jsr body_push
    ldx #0
    jsr face_opponent
    ldx #1
    jmp face_opponent

check_round_end:
    lda p_health
    beq @ko
    lda p_health+1
    beq @ko
    inc timer_sub
    lda timer_sub
    cmp #60
    bcc @rts
    lda #0
    sta timer_sub
    dec timer
    bne @rts
    ; time-out: more health wins, equal health is a draw (both score)
    lda #0
    sta round_ko
    lda p_health
    cmp p_health+1
    beq @draw
    bcc @p2
    lda #1
    bne @end
@p2:
    lda #2
    bne @end
@draw:
    lda #3
    bne @end
@ko:
    lda #1
    sta round_ko
    ldx #1
@koeach:
    lda p_health,x
    bne :+
    lda #ST_KO
    sta p_state,x
    lda #0
    sta p_move,x
    sta p_stun,x
    sta p_air,x
    sta p_jdx,x
    sta p_timer,x
:   dex
    bpl @koeach
    lda #0
    ldx p_health        ; P1 alive: P1 wins
    beq :+
    ora #1
:   ldx p_health+1
    beq :+
    ora #2
:   cmp #0
    bne @end
    lda #3              ; double KO
@end:
    sta round_winner
    lsr a
    bcc :+
    inc p_wins
:   lsr a
    bcc :+
    inc p_wins+1
:   lda #PH_ROUND_OVER
    sta phase
    lda #0
    sta phase_timer
@rts:
    rts

do_round_over:
    inc phase_timer
    lda phase_timer
    cmp #KO_PAUSE
    bcs :+
    rts                 ; KO pause: everything frozen
:   lda #0              ; afterwards fighters settle with no input
    sta pad
    sta pad+1
    sta pad_new
    sta pad_new+1
    jsr step_fighters
    lda phase_timer
    cmp #WIN_POSE_AT
    bne @end_check
    lda round_winner
    cmp #3
    beq @end_check
    ldx #0
    lsr a
    bcs :+
    inx
:   lda #ST_VICTORY
    sta p_state,x
    lda #GROUND_Y
    sta p_y,x
    lda #0
    sta p_air,x
    sta p_move,x
    sta p_stun,x
    sta p_timer,x
    sta p_push,x
@end_check:
    lda phase_timer
    cmp #ROUND_OVER_FRAMES
    bcc @rts
    lda p_wins
    cmp #ROUNDS_TO_WIN
    bcs @over
    lda p_wins+1
    cmp #ROUNDS_TO_WIN
    bcs @over
    inc round_no
    jmp reset_round
@over:
    lda #PH_MATCH_OVER
    sta phase
    lda #1
    sta match_over
@rts:
    rts

; ---------------------------------------------------------------------------------------------
; One fighter's decisions (X = player). t0 = toward button, t1 = away button.

fighter_control:
    lda p_timer,x
    cmp #$FF
    beq :+
    inc p_timer,x
:   lda p_facing,x
    bne @left
    lda #BTN_RIGHT
    sta t0
    lda #BTN_LEFT
    sta t1
    bne @go
@left:
    lda #BTN_LEFT
    sta t0
    lda #BTN_RIGHT
    sta t1
@go:
    lda p_state,x
    cmp #ST_JUMP
    bcs :+
    jmp actionable      ; idle, walks, crouch
:   beq st_jump
    cmp #ST_ATTACK
    beq st_attack
    cmp #ST_BLOCK_HIGH
    beq to_actionable
    cmp #ST_BLOCK_LOW
    beq to_actionable
    cmp #ST_HITSTUN
    beq st_stun
    cmp #ST_BLOCKSTUN
    beq st_stun
    cmp #ST_KNOCKDOWN
    beq st_knockdown
    cmp #ST_WAKEUP
    beq st_wakeup
    rts                 ; KO, victory
to_actionable:
    jmp actionable

st_attack:
    ldy p_move,x
    lda mv_flags,y
    and #FL_AIR
    bne @rts            ; air attacks end on landing
    lda p_timer,x
    cmp mv_total,y
    bcc @rts
    lda #0
    sta p_move,x
    beq to_neutral
@rts:
    rts

st_stun:
    dec p_stun,x
    beq to_neutral
    rts

st_knockdown:
    lda p_timer,x
    cmp #KNOCKDOWN_FRAMES
    bcc :+
    lda #ST_WAKEUP
    jmp set_state
:   rts

st_wakeup:
    lda p_timer,x
    cmp #WAKEUP_FRAMES
    bcs to_neutral
    rts

to_neutral:             ; back to idle, and act on this frame's input
    lda #ST_IDLE
    jsr set_state
    jmp actionable

st_jump:
    lda p_airused,x
    bne @rts
    lda pad_new,x
    and #BTN_A|BTN_B
    beq @rts
    ldy #MV_JUMP_PUNCH
    and #BTN_A
    bne :+
    ldy #MV_JUMP_KICK
:   lda #1
    sta p_airused,x
    jmp start_move
@rts:
    rts

start_move:             ; Y = move id
    tya
    sta p_move,x
    lda #0
    sta p_hitdone,x
    lda #ST_ATTACK
    jmp set_state

actionable:
    lda pad_new,x
    and #BTN_A|BTN_B
    beq @no_attack
    sta t2
    lda pad,x
    and #BTN_DOWN
    beq @stand
    ldy #MV_CROUCH_PUNCH
    lda t2
    bmi start_move
    ldy #MV_SWEEP
    bne start_move
@stand:
    lda pad,x
    and t0
    beq @light
    ldy #MV_HEAVY_PUNCH
    lda t2
    bmi start_move
    ldy #MV_HEAVY_KICK
    bne start_move
@light:
    ldy #MV_LIGHT_PUNCH
    lda t2
    bmi start_move
    ldy #MV_LIGHT_KICK
    bne start_move

@no_attack:
    lda pad,x
    and #BTN_UP
    beq @no_jump
    lda pad,x
    and t0
    beq :+
    lda #JUMP_FWD
    bne @jdir
:   lda pad,x
    and t1
    beq :+
    lda #<(-JUMP_BACK)
    bne @jdir
:   lda #0
@jdir:
    ldy p_facing,x
    beq :+
    eor #$FF
    clc
    adc #1
:   sta p_jdx,x
    lda #1
    sta p_air,x
    lda #0
    sta p_airused,x
    lda #ST_JUMP
    bne set_state

@no_jump:
    lda pad,x
    and #BTN_DOWN
    beq @standing
    lda #ST_CROUCH      ; guard_pass turns this into a low guard when threatened
    bne set_state
@standing:
    lda pad,x
    and t0
    beq :+
    lda #ST_WALK_FORWARD
    bne set_state
:   lda pad,x
    and t1
    beq @idle
    lda #ST_WALK_BACK   ; or a high guard, see guard_pass
    bne set_state
@idle:
    lda #ST_IDLE
    ; fall through

; A = new state for fighter X. p_timer counts frames in the state, so it restarts only when the
; state changes: walking or crouching on keeps counting (the walk cycle reads it). A hit restarts
; it even in the same state (hitstun after hitstun), so apply_outcome writes p_timer itself.
set_state:
    cmp p_state,x
    beq :+
    sta p_state,x
    lda #0
    sta p_timer,x
:   rts

; After both fighters have decided, a fighter holding away while the opponent attacks within
; GUARD_RANGE px stands (or crouches) in guard instead of walking back. Run as a second pass so
; an attack started this frame by either pad is seen the same way by the other.
guard_pass:
    lda p_state,x
    cmp #ST_WALK_BACK
    beq @high
    cmp #ST_BLOCK_HIGH
    beq @high
    cmp #ST_CROUCH
    beq @low
    cmp #ST_BLOCK_LOW
    beq @low
    rts
@high:
    jsr opponent_threat
    lda #ST_WALK_BACK
    bcc set_state
    lda #ST_BLOCK_HIGH
    bne set_state
@low:
    jsr opponent_threat
    bcc @crouch
    jsr holds_away
    beq @crouch
    lda #ST_BLOCK_LOW
    bne set_state
@crouch:
    lda #ST_CROUCH
    bne set_state

holds_away:             ; Z clear when X holds away from the way it faces
    lda p_facing,x
    bne :+
    lda #BTN_LEFT
    and pad,x
    rts
:   lda #BTN_RIGHT
    and pad,x
    rts

; Carry set when the opponent is attacking within GUARD_RANGE px.
opponent_threat:
    txa
    eor #1
    tay
    lda p_state,y
    cmp #ST_ATTACK
    bne @no
    jsr distance
    cmp #GUARD_RANGE
    bcs @no
    sec
    rts
@no:
    clc
    rts

distance:               ; A = |p_x[X] - p_x[Y]|
    lda p_x,x
    sec
    sbc p_x,y
    bcs :+
    eor #$FF
    adc #1
:   rts

; ---------------------------------------------------------------------------------------------
; Movement (X = player)

fighter_physics:
    lda p_push,x
    beq @walk
    cmp #PUSH_SPEED
    bcc :+
    lda #PUSH_SPEED
:   sta t2
    lda p_push,x
    sec
    sbc t2
    sta p_push,x
    lda p_pushdir,x
    bpl :+
    lda p_x,x
    sec
    sbc t2
    sta p_x,x
    jmp @walk
:   lda p_x,x
    clc
    adc t2
    sta p_x,x
@walk:
    lda p_state,x
    cmp #ST_WALK_FORWARD
    bne :+
    lda #WALK_FWD
    jsr move_toward
    jmp @air
:   cmp #ST_WALK_BACK
    bne @air
    lda #<(-WALK_BACK)
    jsr move_toward
@air:
    ldy p_air,x
    beq @fall
    lda #GROUND_Y
    sec
    sbc jump_height,y
    sta p_y,x
    lda p_x,x
    clc
    adc p_jdx,x
    sta p_x,x
    cpy #JUMP_FRAMES
    bcs @land
    inc p_air,x
    jmp clamp_x
@land:
    lda #0
    sta p_air,x
    sta p_jdx,x
    lda p_state,x
    cmp #ST_JUMP
    beq :+
    cmp #ST_ATTACK
    bne clamp_x
:   lda #0
    sta p_move,x
    lda #ST_IDLE
    jsr set_state
    jmp clamp_x
@fall:                  ; knocked down in the air: drop to the floor
    lda p_y,x
    cmp #GROUND_Y
    bcs clamp_x
    adc #FALL_SPEED
    cmp #GROUND_Y
    bcc :+
    lda #GROUND_Y
:   sta p_y,x
clamp_x:
    lda p_x,x
    cmp #STAGE_LEFT
    bcs :+
    lda #STAGE_LEFT
:   cmp #STAGE_RIGHT+1
    bcc :+
    lda #STAGE_RIGHT
:   sta p_x,x
    rts

move_toward:            ; A = signed px toward the way X faces
    ldy p_facing,x
    beq :+
    eor #$FF
    clc
    adc #1
:   clc
    adc p_x,x
    sta p_x,x
    rts

; Fighters on the ground may not stand closer than BODY_W: each gives way by half.
body_push:
    lda p_air
    ora p_air+1
    bne @rts
    lda p_x
    cmp p_x+1
    bcc @p1left
    bne @p2left
    lda p_facing
    beq @p1left
@p2left:
    ldx #1
    ldy #0
    beq @go
@p1left:
    ldx #0
    ldy #1
@go:
    lda p_x,y
    sec
    sbc p_x,x
    cmp #BODY_W
    bcs @rts
    sta t2
    lda #BODY_W
    sec
    sbc t2
    lsr a
    sta t3
    bcc :+              ; an odd overlap: the fighter nearer the centre gives the extra px,
    lda p_x,x           ; which keeps the rule mirror-symmetric about x = 128
    clc
    adc p_x,y
    bcc :+
    inc t3
:
    lda p_x,x
    sec
    sbc t3
    bcc @wall_l
    cmp #STAGE_LEFT
    bcs :+
@wall_l:
    lda #STAGE_LEFT
:   sta p_x,x
    clc
    adc #BODY_W
    cmp #STAGE_RIGHT+1
    bcc :+
    lda #STAGE_RIGHT
    sta p_x,y
    lda #STAGE_RIGHT-BODY_W
    sta p_x,x
    rts
:   sta p_x,y
@rts:
    rts

face_opponent:          ; grounded, free fighters always turn toward the opponent
    lda p_state,x
    cmp #ST_JUMP
    bcc @turn
    cmp #ST_BLOCK_HIGH
    beq @turn
    cmp #ST_BLOCK_LOW
    bne @rts
@turn:
    txa
    eor #1
    tay
    lda p_x,x
    cmp p_x,y
    beq @rts
    lda #FACING_RIGHT
    bcc :+
    lda #FACING_LEFT
:   sta p_facing,x
@rts:
    rts

; ---------------------------------------------------------------------------------------------
; Hits. check_hit (X = attacker) records the outcome for the defender in hit_kind / hit_move /
; hit_dir; apply_hit (X = defender) applies it. t0..t3 = hitbox x0, x1, y0, y1 (half-open).

check_hit:
    txa
    eor #1
    tay
    lda #0
    sta hit_kind,y
    lda p_state,x
    cmp #ST_ATTACK
    beq :+
@no:
    rts
:   lda p_hitdone,x
    bne @no
    ldy p_move,x
    lda p_timer,x
    cmp mv_startup,y
    bcc @no
    cmp mv_active_end,y
    bcs @no
    ; hitbox y
    lda p_y,x
    clc
    adc mv_hb_dy,y
    sta t2
    clc
    adc mv_hb_h,y
    sta t3
    ; hitbox x, mirrored when facing left; clipped to 0..255
    lda p_facing,x
    bne @hb_left
    lda p_x,x
    clc
    adc mv_hb_dx,y
    sta t0
    clc
    adc mv_hb_w,y
    bcc :+
    lda #$FF
:   sta t1
    jmp @hurt
@hb_left:
    lda p_x,x
    sec
    sbc mv_hb_dx,y
    sta t1
    sec
    sbc mv_hb_w,y
    bcs :+
    lda #0
:   sta t0
@hurt:
    sty t6                  ; move id
    stx t7                  ; attacker
    txa
    eor #1
    tax                     ; X = defender now
    lda p_state,x
    cmp #ST_KNOCKDOWN
    bcs @miss               ; knockdown, wakeup, KO, victory: no hurtbox
    lda p_air,x
    beq :+
    lda #<HURT_AIR_DY
    ldy #HURT_AIR_H
    bne @box
:   jsr is_crouching
    bcc :+
    lda #<HURT_CROUCH_DY
    ldy #HURT_CROUCH_H
    bne @box
:   lda #<HURT_STAND_DY
    ldy #HURT_STAND_H
@box:
    sty t5
    clc
    adc p_y,x
    sta t4                  ; hurt y0
    cmp t3
    bcs @miss               ; hurt y0 >= hit y1
    clc
    adc t5
    cmp t2
    beq @miss
    bcc @miss               ; hurt y1 <= hit y0
    lda p_x,x
    clc
    adc #<HURT_STAND_DX      ; every hurtbox has the same x extent
    cmp t1
    bcs @miss
    clc
    adc #HURT_STAND_W
    cmp t0
    beq @miss
    bcc @miss
    ; it connects: spark between the boxes, then hit or block
    lda t4
    cmp t2
    bcs :+
    lda t2
:   clc
    adc #3
    sta spark_y
    ldy t7
    lda p_x,x
    clc
    adc p_x,y
    ror a
    sta spark_x
    lda #SPARK_FRAMES
    sta spark_t
    lda #1
    sta p_hitdone,y
    lda p_facing,y
    sta hit_dir,x
    ldy t6
    tya
    sta hit_move,x
    jsr guards
    lda #1
    bcc :+
    lda #2
:   sta hit_kind,x
@miss:
    ldx t7
    rts

is_crouching:           ; carry set when X's hurtbox is the crouching one
    lda p_state,x
    cmp #ST_CROUCH
    beq @yes
    cmp #ST_BLOCK_LOW
    beq @yes
    cmp #ST_ATTACK
    bne :+
    ldy p_move,x
    lda mv_flags,y
    and #FL_CROUCH
    bne @yes
    clc
    rts
:   cmp #ST_BLOCKSTUN
    bne @no
    lda pad,x
    and #BTN_DOWN
    bne @yes
@no:
    clc
    rts
@yes:
    sec
    rts

; Carry set when defender X blocks move Y: a free grounded state, holding away, and the right
; height (FL_HIGH needs a standing guard, FL_LOW a crouching one).
guards:
    lda p_state,x
    cmp #ST_JUMP
    bcc @state_ok
    cmp #ST_BLOCK_HIGH
    beq @state_ok
    cmp #ST_BLOCK_LOW
    beq @state_ok
    cmp #ST_BLOCKSTUN
    bne @no
@state_ok:
    lda p_air,x
    bne @no
    jsr holds_away
    beq @no
    lda pad,x
    and #BTN_DOWN
    beq @standing
    lda mv_flags,y
    and #FL_HIGH
    bne @no
    sec
    rts
@standing:
    lda mv_flags,y
    and #FL_LOW
    bne @no
    sec
    rts
@no:
    clc
    rts

apply_hit:              ; X = defender
    lda hit_kind,x
    bne :+
    rts
:   lda p_health,x
    sta t4
    jsr apply_outcome
    lda t4              ; credit the attacker with the health actually lost
    sec
    sbc p_health,x
    sta t4
    txa
    eor #1
    asl a
    tay
    lda p_dealt,y
    clc
    adc t4
    sta p_dealt,y
    lda p_dealt+1,y
    adc #0
    sta p_dealt+1,y
    rts

apply_outcome:
    ldy hit_move,x
    lda hit_kind,x
    cmp #2
    beq @block
    lda p_health,x
    sec
    sbc mv_damage,y
    bcs :+
    lda #0
:   sta p_health,x
    lda #0
    sta p_move,x
    sta p_timer,x
    sta p_stun,x
    lda mv_flags,y
    and #FL_KNOCKDOWN
    ora p_air,x
    beq @stun
    lda #ST_KNOCKDOWN
    sta p_state,x
    lda #0
    sta p_air,x
    sta p_jdx,x
    beq @push
@stun:
    lda #ST_HITSTUN
    sta p_state,x
    lda mv_hitstun,y
    sta p_stun,x
    bne @push
@block:
    lda p_health,x
    sec
    sbc mv_chip,y
    bcs :+
    lda #0
:   sta p_health,x
    lda #ST_BLOCKSTUN
    sta p_state,x
    lda mv_blockstun,y
    sta p_stun,x
    lda #0
    sta p_timer,x
    sta p_move,x
@push:                  ; push the defender away; a cornered defender pushes the attacker back
    lda mv_push,y
    sta t2
    lda hit_dir,x
    bne @push_left
    lda p_x,x
    clc
    adc t2
    cmp #STAGE_RIGHT+1
    bcs @recoil
    lda #1
    bne @set
@push_left:
    lda p_x,x
    sec
    sbc t2
    bcc @recoil
    cmp #STAGE_LEFT
    bcc @recoil
    lda #$FF
@set:
    sta p_pushdir,x
    lda t2
    sta p_push,x
    rts
@recoil:
    txa
    eor #1
    tay
    lda hit_dir,x
    beq :+
    lda #1
    bne :++
:   lda #$FF
:   sta p_pushdir,y
    lda t2
    sta p_push,y
    rts

; ---------------------------------------------------------------------------------------------
; Drawing: OAM buffer, HUD rows and the message row, all built in RAM for the next NMI.

draw:
    lda #0
    sta oam_i
    lda spark_t
    beq @fighters
    lda spark_x
    sta t0
    lda spark_y
    sta t1
    lda #2
    sta t2
    ldy #<ms_spark0
    lda #>ms_spark0
    ldx spark_t
    cpx #SPARK_FRAMES/2
    bcs :+
    ldy #<ms_spark1
    lda #>ms_spark1
:   sty ptr
    sta ptr+1
    jsr draw_meta
@fighters:
    ; the attacking fighter is drawn in front
    ldx #1
    lda p_state+1
    cmp #ST_ATTACK
    beq :+
    ldx #0
:   stx t6
    jsr draw_fighter
    lda t6
    eor #1
    tax
    jsr draw_fighter
    ldx oam_i
    lda #$FF
@hide:
    sta oam_buf,x
    inx
    inx
    inx
    inx
    bne @hide
    jsr draw_hud
    jmp draw_message

draw_fighter:           ; X = player
    jsr fighter_frame
    tay
    cpx #0
    bne :+
    lda frames_kai_lo,y
    sta ptr
    lda frames_kai_hi,y
    sta ptr+1
    jmp @pos
:   lda frames_gor_lo,y
    sta ptr
    lda frames_gor_hi,y
    sta ptr+1
@pos:
    lda p_x,x
    sta t0
    lda p_y,x
    sta t1
    txa                 ; palette = player
    ldy p_facing,x
    beq :+
    ora #$40            ; flip horizontally when facing left
:   sta t2
    ; fall through
draw_meta:              ; ptr = metasprite, t0/t1 = anchor x/y, t2 = attributes
    ldx oam_i
    ldy #0
@loop:
    lda (ptr),y
    cmp #$80
    beq @done
    clc
    adc t1
    sec
    sbc #1              ; OAM y is one line above the sprite's top
    sta oam_buf,x
    iny
    lda (ptr),y
    sta oam_buf+1,x
    lda t2
    sta oam_buf+2,x
    iny
    lda (ptr),y
    bit t2
    bvs @flip
    clc
    adc t0
    jmp @store
@flip:                  ; x = anchor - dx - 8
    eor #$FF
    clc
    adc t0
    sec
    sbc #7
@store:
    sta oam_buf+3,x
    iny
    inx
    inx
    inx
    inx
    jmp @loop
@done:
    stx oam_i
    rts

fighter_frame:          ; X = player -> A = animation frame index
    lda p_state,x
    cmp #ST_IDLE
    bne @walk
    lda frame
    and #$10
    beq :+
    lda #FRAME_IDLE1
    rts
:   lda #FRAME_IDLE0
    rts
@walk:
    cmp #ST_WALK_FORWARD
    beq :+
    cmp #ST_WALK_BACK
    bne @attack
:   lda p_timer,x
    and #$08
    beq :+
    lda #FRAME_WALK1
    rts
:   lda #FRAME_WALK0
    rts
@attack:
    cmp #ST_ATTACK
    bne @blockstun
    ldy p_move,x
    lda p_timer,x
    cmp mv_startup,y
    bcc :+
    cmp mv_active_end,y
    bcs :+
    lda #1
    bne :++
:   lda #0
:   sta t7
    tya
    asl a
    clc
    adc #FRAME_LIGHT_PUNCH0-2
    adc t7
    rts
@blockstun:
    cmp #ST_BLOCKSTUN
    bne @table
    lda pad,x
    and #BTN_DOWN
    beq :+
    lda #FRAME_BLOCK_LOW
    rts
:   lda #FRAME_BLOCK_HIGH
    rts
@table:
    tay
    lda state_frame,y
    rts

state_frame:            ; for the states not handled above, in state-id order
    .byte FRAME_IDLE0, FRAME_WALK0, FRAME_WALK0, FRAME_CROUCH, FRAME_JUMP, FRAME_IDLE0
    .byte FRAME_BLOCK_HIGH, FRAME_BLOCK_LOW, FRAME_HIT, FRAME_BLOCK_HIGH, FRAME_DOWN
    .byte FRAME_RISE, FRAME_DOWN, FRAME_WIN

draw_hud:
    ; P1 bar fills from the left (columns 2-13), P2 from the right (columns 29 down to 18)
    lda p_health
    sta t0
    ldx #2
@p1:
    jsr bar_cell
    lda bar_left,y
    sta hud_buf,x
    inx
    cpx #14
    bne @p1
    lda p_health+1
    sta t0
    ldx #29
@p2:
    jsr bar_cell
    lda bar_right,y
    sta hud_buf,x
    dex
    cpx #17
    bne @p2
    ; timer
    lda timer
    ldy #0
:   cmp #10
    bcc :+
    sbc #10
    iny
    bne :-
:   tax
    lda digit_tiles,x
    sta hud_buf+16
    lda digit_tiles,y
    sta hud_buf+15
    ; round wins under the bars, next to the timer
    ldx #TILE_WIN_OFF
    lda p_wins
    beq :+
    ldx #TILE_WIN_ON
:   stx hud_buf+32+12
    ldx #TILE_WIN_OFF
    cmp #2
    bcc :+
    ldx #TILE_WIN_ON
:   stx hud_buf+32+13
    ldx #TILE_WIN_OFF
    lda p_wins+1
    beq :+
    ldx #TILE_WIN_ON
:   stx hud_buf+32+19
    ldx #TILE_WIN_OFF
    cmp #2
    bcc :+
    ldx #TILE_WIN_ON
:   stx hud_buf+32+18
    rts

bar_cell:               ; Y = px of this 8-px cell filled, from t0 (health left)
    lda t0
    cmp #8
    bcc :+
    sbc #8
    sta t0
    ldy #8
    rts
:   tay
    lda #0
    sta t0
    rts

draw_message:
    ldx #31
:   lda stage_message_row,x
    sta msg_buf,x
    dex
    bpl :-
    lda phase
    cmp #PH_INTRO
    bne @over
    lda phase_timer
    cmp #INTRO_FRAMES/2
    bcs @fight
    ldy #<msg_round
    lda #>msg_round
    bne @print
@fight:
    ldy #<msg_fight
    lda #>msg_fight
    bne @print
@over:
    cmp #PH_FIGHTING
    beq @rts
    cmp #PH_MATCH_OVER
    beq @result
    lda phase_timer
    cmp #WIN_POSE_AT
    bcs @result
    ldy #<msg_time
    lda #>msg_time
    ldx round_ko
    beq @print
    ldy #<msg_ko
    lda #>msg_ko
    bne @print
@result:                ; round (or match) result
    lda phase
    cmp #PH_MATCH_OVER
    bne @round
    lda p_wins
    cmp p_wins+1
    beq @draw
    bcs @kai
    bcc @gor
@round:
    lda round_winner
    cmp #3
    beq @draw
    cmp #1
    beq @kai
@gor:
    ldy #<msg_gor
    lda #>msg_gor
    bne @print
@kai:
    ldy #<msg_kai
    lda #>msg_kai
    bne @print
@draw:
    ldy #<msg_draw
    lda #>msg_draw
@print:                 ; centre the $FF-terminated string at A:Y
    sty ptr
    sta ptr+1
    ldy #0
:   lda (ptr),y
    cmp #$FF
    beq :+
    iny
    bne :-
:   tya
    lsr a
    sta t0
    lda #MSG_COL
    sec
    sbc t0
    tax
    ldy #0
:   lda (ptr),y
    cmp #$FF
    beq @rts
    sta msg_buf,x
    inx
    iny
    bne :-
@rts:
    lda phase           ; "ROUND n": the digit goes in the placeholder at the end
    bne :+
    lda phase_timer
    cmp #INTRO_FRAMES/2
    bcs :+
    ldy round_no
    lda digit_tiles,y
    sta msg_buf-1,x
:   rts

; ---------------------------------------------------------------------------------------------
.segment "RODATA"

.include "assets.inc"
.include "rules_tables.inc"

bar_left:
    .byte TILE_BARL0, TILE_BARL1, TILE_BARL2, TILE_BARL3, TILE_BARL4
    .byte TILE_BARL5, TILE_BARL6, TILE_BARL7, TILE_BARL8
bar_right:
    .byte TILE_BARR0, TILE_BARR1, TILE_BARR2, TILE_BARR3, TILE_BARR4
    .byte TILE_BARR5, TILE_BARR6, TILE_BARR7, TILE_BARR8
digit_tiles:
    .byte TILE_0, TILE_1, TILE_2, TILE_3, TILE_4, TILE_5, TILE_6, TILE_7, TILE_8, TILE_9

msg_round:  .byte TILE_R, TILE_O, TILE_U, TILE_N, TILE_D, 0, TILE_0, $FF
msg_fight:  .byte TILE_F, TILE_I, TILE_G, TILE_H, TILE_T, $FF
msg_ko:     .byte TILE_K, TILE_DOT, TILE_O, TILE_DOT, $FF
msg_time:   .byte TILE_T, TILE_I, TILE_M, TILE_E, $FF
msg_kai:    .byte TILE_K, TILE_A, TILE_I, 0, TILE_W, TILE_I, TILE_N, TILE_S, $FF
msg_gor:    .byte TILE_G, TILE_O, TILE_R, 0, TILE_W, TILE_I, TILE_N, TILE_S, $FF
msg_draw:   .byte TILE_D, TILE_R, TILE_A, TILE_W, $FF

stage:
    .incbin "stage.bin"

.segment "VECTORS"
    .word nmi, reset, irq

.segment "CHARS"
    .incbin "chr.bin"

"""Label recordings and cut the curriculum (`wtf annotate`, `wtf build-curriculum`)."""

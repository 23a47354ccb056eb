"""`wtf export`: recordings and curriculum clips in formats other tools read (LeRobotDataset v3.0)."""

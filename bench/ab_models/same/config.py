REPEATS = 1  # relative import: each folder has its own config.py

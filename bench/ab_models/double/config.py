REPEATS = 2  # relative import: each folder has its own config.py

"""The param file's sections and their keys: the key mechanism (keys.py), reading JSON/YAML and --set (param_file.py), and one dataclass per section."""

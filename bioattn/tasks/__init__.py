"""Tasks: everything between the data/models and the commands; each task's ``task.py`` defines its Task."""

"""The command layer: the generic task command builder and the commands that are no task's."""

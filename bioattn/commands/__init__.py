"""The command layer: the generic builder of every task's command (:mod:`~bioattn.commands.task_command`), the
training flags it adds (:mod:`~bioattn.commands.training_args`) and the commands that are no task's (``data fetch``,
``models``)."""

"""Tasks: everything between the data/models and the commands, importable by users.

Each task is a subpackage (:mod:`bioattn.tasks.promoter`, :mod:`bioattn.tasks.ct`, :mod:`bioattn.tasks.msa`, ...)
whose ``task.py`` defines its :class:`~bioattn.tasks.base.Task`; :mod:`bioattn.tasks.common` and
:mod:`bioattn.tasks.trust` hold what they share. Tasks never import :mod:`bioattn.commands` or :mod:`bioattn.cli`.
"""

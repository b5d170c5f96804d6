"""The pipeline: the ``toktok`` command, the orchestrator, the stages and the work folder.

Installed as ``toktoktok_stages`` (the repository keeps the folder
``stages/``); its modules import each other relatively. Importing it sets
nothing: what the command needs before numpy and click load is done by
``cli.entry``. docs/architecture.md draws the four layers.
"""

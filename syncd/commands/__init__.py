"""The command line's commands, one module a group (`read_cmds`, `mirror_cmds`, `daemon_cmds`, ...), and
the helpers only they use: `progress` (bars and log lines), `tables`, `machine_output` (`--json`),
`typer_compat` (where typer's help and syncd's conventions differ), `change_lines` (a mirror's changes
as lines a person reads)."""

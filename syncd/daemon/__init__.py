"""The syncd daemon: long-lived service that runs configured jobs on schedules.

`schedule` is its pure core (next-run arithmetic over `syncd.config.cron`, per-job timer state), kept
free of I/O and asyncio so every timing decision can be tested without a clock.
"""

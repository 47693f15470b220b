"""``apogee broker-container``: several brokers on one machine, one process each.

A broker serves one asyncio event loop on one core.  RocketMQ's answer for a machine with
more cores than one broker uses is several broker groups per machine, which RocketMQ 5 hosts
in one process as its BrokerContainer (``mqbrokercontainer``).  Python needs processes, not
threads, so Apogee's container is a small supervisor that runs each broker as a child
process of its own (``apogee broker``, unchanged): clients spread a topic's queues over all
brokers of a cluster, so the cores share the load while each CommitLog keeps one writer.
docs/multicore.md says why and what it measured.

``config`` (the container's settings, RocketMQ's names), ``plan`` (the brokers of a
container: derived configs, ports, the command of each child) and ``backoff`` (when a dead
child starts again) are pure; ``supervisor`` runs the children.
"""

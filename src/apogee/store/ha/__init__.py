"""Master/slave replication (RocketMQ 4.x HA): the wire protocol and the link's rules
(``protocol``, pure), the master's HA port (``master``) and the slave's client (``slave``)."""

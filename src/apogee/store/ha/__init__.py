"""Master/slave replication (RocketMQ 4.x HA): the wire protocol and the link's rules
(``protocol``, pure).  The sockets are the broker's (``apogee.broker.ha``)."""

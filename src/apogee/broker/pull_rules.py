"""Where a pull answer sends the consumer next, and what a slave answers differently
(RocketMQ 4.9.8 ``PullMessageProcessor.processRequest``).  Pure: the pull processor asks,
the unit tests check every rule.

* ``suggestWhichBrokerId``: with ``slaveReadEnable`` the group's ``whichBrokerWhenConsumeSlowly``
  (default 1) when the store says the consumer reads far behind the head (more than
  ``accessMessageInMemoryMaxRatio`` % of RAM: "pull from a slave"), else the group's
  ``brokerId`` (default 0).  Without ``slaveReadEnable`` always 0 (the master), on a slave
  too: a consumer that fell back to a slave is told to go home at every answer.
* A slave serves pulls even without ``slaveReadEnable``: RocketMQ sets PULL_RETRY_IMMEDIATELY
  for that case and then overwrites the code from the store's status, which is how consumers
  keep reading while the master is down.
* A slave never stores the commit offset a pull carries (the master's table is the truth;
  the slave copies it every 10 s), and answers an OFFSET_MOVED with PULL_RETRY_IMMEDIATELY
  and the group's ``brokerId`` unless ``offsetCheckInSlave``: a slave that is behind must not
  move a consumer's offset back to its own, shorter, queue.
"""

from __future__ import annotations

from apogee.common.constants import MASTER_ID


def suggest_broker_id(
    slave_read_enable: bool, far_behind: bool, group_broker_id: int, which_broker_when_slow: int
) -> int:
    """The ``suggestWhichBrokerId`` of a pull answer.  ``far_behind``: the store's
    ``suggestPullingFromSlave`` (the pulled data lies beyond the in-memory share of RAM)."""
    if not slave_read_enable:
        return MASTER_ID
    return which_broker_when_slow if far_behind else group_broker_id


def slave_corrects_offset(is_slave: bool, offset_check_in_slave: bool) -> bool:
    """Whether an OFFSET_MOVED outcome is answered as such (a master always; a slave only
    with ``offsetCheckInSlave``).  When not, the answer is PULL_RETRY_IMMEDIATELY with the
    group's ``brokerId`` as the suggestion."""
    return not is_slave or offset_check_in_slave


def stores_commit_offset(is_slave: bool) -> bool:
    """Whether the commit offset a pull carries (sysflag COMMIT_OFFSET) is stored here."""
    return not is_slave

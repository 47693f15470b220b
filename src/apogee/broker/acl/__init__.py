"""RocketMQ ACL 1.0 on the broker (docs/security.md).

``addresses`` (whitelist patterns), ``permission`` (perms and the resources each request
touches) and ``rules`` (accounts and the check, in RocketMQ's order) are pure; ``plain_file``
finds, reads and edits plain_acl.yml; ``service`` keeps the rules in force in step with the
files and is the dispatcher every request passes when ``aclEnable=true``.
"""

"""MirrorMaker 2 as a migration trial runs it: the properties of one replication flow and the
names of the topics MM2 keeps.

Kafka -> es (the migration): IdentityReplicationPolicy, so topics keep their names on es and
consumers switch without renaming anything; checkpoints every second, group offsets synced to es
every second (sync.group.offsets.enabled), offset syncs emitted (the default
offset.lag.max=100 is kept, as a new user gets it, unless the trial is told otherwise), the source
consumer reading read_committed (MM2's own default is the Java consumer's read_uncommitted, which
would copy records of aborted transactions), topic configs synced, ACL sync off.
es -> Kafka (the way back): DefaultReplicationPolicy, so es's topics land on Kafka as
`es.<topic>` beside the originals, with checkpoints and group-offset sync as above.
The reverse flow of each is disabled and emits no heartbeats (see flow_props).
Replication factors are 1: both clusters are single nodes.
"""

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
DEFAULT = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


def flow_props(src_alias, src_bootstrap, dst_alias, dst_bootstrap, topics, groups, identity,
               offset_lag_max=None, isolation="read_committed"):
    props = [
        ("clusters", f"{src_alias}, {dst_alias}"),
        (f"{src_alias}.bootstrap.servers", src_bootstrap),
        (f"{dst_alias}.bootstrap.servers", dst_bootstrap),
        (f"{src_alias}->{dst_alias}.enabled", "true"),
        (f"{dst_alias}->{src_alias}.enabled", "false"),
        # Without this, MM2 still runs a worker for the disabled flow (to emit its heartbeats), and
        # that worker restarts whatever connectors an earlier MM2 stored in that flow's config
        # topic: the way back would resume the forward flow's connectors.
        (f"{dst_alias}->{src_alias}.emit.heartbeats.enabled", "false"),
        (f"{src_alias}->{dst_alias}.topics", topics),
        (f"{src_alias}->{dst_alias}.groups", groups),
        ("replication.policy.class", IDENTITY if identity else DEFAULT),
        ("tasks.max", "4"),
        ("emit.heartbeats.enabled", "true"),
        ("emit.checkpoints.enabled", "true"),
        ("emit.checkpoints.interval.seconds", "1"),
        ("sync.group.offsets.enabled", "true"),
        ("sync.group.offsets.interval.seconds", "1"),
        ("emit.offset-syncs.enabled", "true"),
        ("refresh.topics.interval.seconds", "5"),
        ("refresh.groups.interval.seconds", "5"),
        ("sync.topic.configs.enabled", "true"),
        ("sync.topic.acls.enabled", "false"),
        (f"{src_alias}.consumer.isolation.level", isolation),
        ("replication.factor", "1"),
        ("checkpoints.topic.replication.factor", "1"),
        ("heartbeats.topic.replication.factor", "1"),
        ("offset-syncs.topic.replication.factor", "1"),
        ("offset.storage.replication.factor", "1"),
        ("status.storage.replication.factor", "1"),
        ("config.storage.replication.factor", "1"),
    ]
    if offset_lag_max is not None:
        props.append(("offset.lag.max", str(offset_lag_max)))
    return props


def checkpoints_topic(src_alias):
    """On the target cluster, for both policies."""
    return f"{src_alias}.checkpoints.internal"


def remote_topic(src_alias, topic, identity):
    return topic if identity else f"{src_alias}.{topic}"

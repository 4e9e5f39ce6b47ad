"""Record real Redis Cluster replies for tests/unit/test_cluster.c (not a test module).

    /usr/bin/python3 tests/integration/rcluster_record.py > /tmp/recorded.c

Starts a 3-master + 3-replica cluster (rcluster.py) and prints, as C string literals, the raw
RESP bytes of: CLUSTER SLOTS at the start (and under the other two preferred endpoint types),
the MOVED and ASK errors, CLUSTER SLOTS after slots 100..109 moved from the first master to
the second (a range split), and after that second master was SIGKILLed and its replica took
over. It checks that CLUSTER SLOTS does not change while a slot is half-way through a migration
(that shows only as ASK). The unit test's expectations (ports, ids) follow the recording:
re-recording means updating them.
"""

from __future__ import annotations

import sys

from rcluster import RedisCluster, command_raw, keyslot, key_in_slots


def c_literal(name: str, data: bytes) -> str:
    lines, cur = [], ""
    for ch in data.decode():
        cur += {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}.get(ch, ch)
        if ch == "\n" and len(cur) > 60:
            lines.append(cur)
            cur = ""
    if cur:
        lines.append(cur)
    return f"static const char {name}[] =\n" + "\n".join(f'    "{line}"' for line in lines) + ";\n"


def main() -> int:
    rec: dict[str, bytes] = {}
    with RedisCluster() as c:
        m = c.masters()
        rec["REC_INITIAL"] = command_raw(m[0].port, "CLUSTER", "SLOTS")
        owner = c.node_by_id(next(nid for a, b, nid in c.slot_owners() if a <= keyslot("foo") <= b))
        other = next(n for n in m if n is not owner)
        rec["REC_MOVED"] = command_raw(other.port, "GET", "foo")
        for kind, name in (("unknown-endpoint", "UNKNOWN_ENDPOINT"), ("hostname", "HOSTNAME_UNSET")):
            other.cli("CONFIG", "SET", "cluster-preferred-endpoint-type", kind)
            rec[f"REC_SLOTS_{name}"] = command_raw(other.port, "CLUSTER", "SLOTS")
            rec[f"REC_MOVED_{name}"] = command_raw(other.port, "GET", "foo")
        other.cli("CONFIG", "SET", "cluster-preferred-endpoint-type", "ip")
        # slot 105 (inside the first master's range) half-way to the second master: ASK
        keys = [key_in_slots(105, 105, f"k{i}") for i in range(3)]
        for k in keys:
            m[0].cli("SET", k, "v")
        src = c.begin_migration(105, m[1])
        c.move_keys(105, src, m[1], count=1)
        rec["REC_ASK"] = next(r for r in (command_raw(src.port, "GET", k) for k in keys) if r.startswith(b"-ASK"))
        # a migration shows only as ASK: CLUSTER SLOTS is what it was, so it is not printed
        if command_raw(src.port, "CLUSTER", "SLOTS") != rec["REC_INITIAL"]:
            print("/* NOTE: CLUSTER SLOTS changed during the migration of slot 105 */")
        c.move_keys(105, src, m[1])
        c.end_migration(105, m[1])
        c.wait_stable()
        c.migrate_slots(100, 104, m[1])
        c.migrate_slots(106, 109, m[1])
        rec["REC_SPLIT"] = command_raw(m[2].port, "CLUSTER", "SLOTS")
        victim, heir, secs = c.kill_master(1)
        rec["REC_FAILOVER"] = command_raw(heir.port, "CLUSTER", "SLOTS")
        print(f"/* recorded: masters {[n.address for n in m]}; killed {victim.address} "
              f"({victim.node_id}), {heir.address} ({heir.node_id}) took over in {secs:.1f} s */")
    for name, data in rec.items():
        print(c_literal(name, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A malicious peer agent that pushes its reply's objects slowly: does the ServerApp's round timeout hold, and do the quick object retries become a request flood?

usage: python studies/redteam/attack_slow_objects.py [--objects 60] [--gap 150] [--round-timeout 300]

The ServerApp pulls each reply's objects with Flower's `pull_objects` (`flwr.superlink.grid.http_grid`), which
`deploy.server_main` / `pipeline_server_main` patch with `supernode.quick_object_pulls`: ask again after 0.01 s,
doubling to 0.5 s (Flower: 1 s to 10 s), Flower's other limits kept (500 tries per object, 7200 s per message).
`PollingGrid.send_and_receive` checks its timeout (run_config round-timeout, node-timeout) only between two pulls, so
while one pull waits for a reply's objects every agent's round waits.

The attack: the peer's SuperNode pushes its reply (the message and its object tree: the SuperLink hands it to the
ServerApp at once) with OBJECTS objects (a peer chooses how many records its reply has), then pushes one object
every GAP seconds: below the SuperLink's push-session TTL (180 s, refreshed by each object stored) and below the
time the quick retries give one object (about 200 s at the least), so no pull gives up until Flower's 7200 s.
The SuperLink is modelled faithfully enough: an object pushed is found, one preregistered and not yet pushed is
'not available' (the pull retries), and after 180 s without a push the session expires (the pull fails at once).
Time is virtual (a clock advanced by each wait; one pulling thread), so the run takes seconds.

Prints, for the patched pulls (this package's) and Flower's own: how long the pull of that one reply held the
ServerApp, how many PullObject requests it made, and their rate. Exit 0 if the patched pull returned within
ROUND_TIMEOUT seconds and at most 1/(0.5 * 0.8) requests per second per thread (the cap less\nFlower's jitter: no flood); 1 otherwise, naming what broke."""
import argparse, sys, threading, types
import flwr.supercore.inflatable.inflatable_utils as iu
from flwr.supercore.inflatable.inflatable_utils import ObjectPullError, ObjectUnavailableError, pull_objects
from pfwcp_nb.federation.supernode import quick_object_pulls

TTL = 180.0   # flwr.supercore.constant.OBJECT_PUSH_SESSION_TTL_SECONDS


class Clock:
    "Virtual seconds: each wait of the pulling thread advances them."
    def __init__(self): self.t = 0.0
    def monotonic(self): return self.t


def run_pull(pull, objects: int, gap: float) -> dict:
    "One reply of `objects` objects pulled by `pull` while the peer pushes object j at (j + 1) * gap virtual seconds."
    clock, calls = Clock(), [0]
    class Event(threading.Event):
        def wait(self, timeout=None):
            if not self.is_set(): clock.t += timeout
            return self.is_set()
    saved = iu.time, iu.threading, iu.get_num_workers
    iu.time = types.SimpleNamespace(monotonic=clock.monotonic)
    iu.threading = types.SimpleNamespace(Event=Event, Lock=threading.Lock)
    iu.get_num_workers = lambda n: 1               # one thread: virtual time is exact
    def pull_object(obj_id):
        calls[0] += 1
        j = int(obj_id)
        pushed = int(clock.t // gap)                   # objects pushed so far: 0..pushed-1
        if pushed >= objects: pushed = objects
        if clock.t - min(pushed, objects) * gap > TTL and pushed < objects:
            raise ObjectPullError(obj_id, "push session expired")   # the SuperLink dropped the message
        if j < pushed: return b"x"
        raise ObjectUnavailableError(obj_id)
    try:
        try:
            pull([str(j) for j in range(objects)], pull_object)
            outcome = "all objects pulled"
        except ObjectPullError as e:
            outcome = f"gave up: {e}"
    finally:
        iu.time, iu.threading, iu.get_num_workers = saved
    return {"held_s": clock.t, "requests": calls[0], "rate": calls[0] / max(clock.t, 1e-9), "outcome": outcome}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: the round timeout held and no flood.")
    ap.add_argument("--objects", type=int, default=60, help="objects in the peer's reply (default 60)")
    ap.add_argument("--gap", type=float, default=150.0, help="seconds between two objects the peer pushes (default 150, < 180)")
    ap.add_argument("--round-timeout", type=float, default=300.0,
                    help="the run's round-timeout / node-timeout (flower_deploy.sh: 300; PIPELINE_RUN_CONFIG default: 60)")
    a = ap.parse_args(argv)
    if a.objects < 1 or not 0 < a.gap < TTL or a.round_timeout <= 0:
        ap.error("--objects >= 1, 0 < --gap < 180 and --round-timeout > 0")
    mod = types.SimpleNamespace(pull_objects=pull_objects, __name__="http_grid (copy)")
    quick_object_pulls(mod, max_time=a.round_timeout)  # exactly what server_main does to http_grid (node-timeout)
    res = {"pfwcp (quick retries)": run_pull(mod.pull_objects, a.objects, a.gap),
           "flower's own": run_pull(pull_objects, a.objects, a.gap)}
    for name, r in res.items():
        print(f"{name:22s} held the ServerApp {r['held_s']:.0f} virtual s for one reply; {r['requests']} PullObject "
              f"requests ({r['rate']:.2f}/s); {r['outcome'][:100]}")
    ours, broke = res["pfwcp (quick retries)"], []
    if ours["held_s"] > a.round_timeout + 0.5:                 # + the last retry wait (quick_object_pulls cap)
        broke.append(f"one peer held the ServerApp's round {ours['held_s']:.0f} s, above its round timeout "
                     f"{a.round_timeout:.0f} s (pull_objects' max_time is Flower's 7200 s; PollingGrid checks its "
                     "timeout only between pulls)")
    if ours["rate"] > 1 / (0.5 * 0.8):                 # one thread's most: the cap less Flower's 20 % jitter
        broke.append(f"the quick retries asked {ours['rate']:.2f} times a second (a flood)")
    if broke:
        sys.exit("BROKEN: " + "; ".join(broke))
    print("held: the pull returned within the round timeout, without a flood")


if __name__ == "__main__":
    main()

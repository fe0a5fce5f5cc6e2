"""Does `supernode.check_loop` refuse every flwr SuperNode loop whose waits SuperNodeClock would get wrong (the launcher of `scripts/flower_deploy.sh`)?

usage: python studies/redteam/attack_loop_check.py

`python -m pfwcp_nb.federation.supernode` patches `time` and `_pull_and_store_message` of
flwr.supernode.start_client_internal after `check_loop` accepted the module's source; SuperNodeClock.sleep turns
3 s into the backoff, 0.5 s into the reply wait, and raises on any other wait. A wrong acceptance would shorten a
wait that is not the idle poll (e.g. a reconnect backoff: a request flood against the SuperLink) or keep a loop whose
pulls the backoff does not see. Each mutation below is what a later flwr could plausibly change; the check must
refuse it (RuntimeError) before anything is patched. Also tried: patching twice, a second `quick_object_pulls` on
an already patched module, and the backoff's bounds after any number of empty pulls.
Exit 0 if every mutation was refused and the real flwr 1.42 loop accepted; 1 otherwise, naming each accepted mutation."""
import argparse, inspect, sys, types
import flwr.supernode.start_client_internal as loop
from pfwcp_nb.federation.supernode import Backoff, SuperNodeClock, check_loop, patch_supernode, quick_object_pulls

SRC = inspect.getsource(loop)
MUTATIONS = {   # name -> the loop's source as a later flwr might have it
    "a reconnect wait of 3 s added": SRC.replace("time.sleep(3)", "time.sleep(3)\n                time.sleep(3)", 1),
    "the idle wait computed": SRC.replace("time.sleep(3)", "time.sleep(wait_s)", 1),
    "the idle wait from a keyword": SRC.replace("time.sleep(3)", "time.sleep(seconds=3)", 1),
    "a monotonic clock added": SRC.replace("time.sleep(3)", "time.sleep(3); t = time.monotonic()", 1),
    "the reply wait dropped": SRC.replace("time.sleep(0.5)", "pass", 1),
    "the pull renamed": SRC.replace("run_id = _pull_and_store_message(", "run_id = _pull_message(", 1),
    "sleep imported by name": SRC.replace("time.sleep(3)", "sleep(3)", 1) + "\nfrom time import sleep\n",
    "an alias of time": SRC.replace("time.sleep(3)", "_t.sleep(3)", 1) + "\nimport time as _t\n",
    # the same three calls, another meaning: the idle wait moved to a helper, `time.sleep(3)` now the wait before a
    # reconnect after a failed pull (a failed pull never reaches Backoff.pulled, so the patched wait stays at 0.05 s
    # after a message: a reconnect every 0.05 s, a flood against a SuperLink that is down)
    "3 s becomes a reconnect wait": SRC.replace(
        "            run_id = _pull_and_store_message(", "            try:\n                run_id = _pull_and_store_message(", 1
    ).replace("                trusted_entities=trusted_entities,\n            )\n\n",
              "                trusted_entities=trusted_entities,\n            )\n            except ConnectionError:\n"
              "                time.sleep(3)   # reconnect after 3 s\n                continue\n\n", 1
    ).replace("                # If no message was received, wait for a while\n                time.sleep(3)\n",
              "                idle_wait()   # now in another module\n", 1),
}
EXPECT_ACCEPTED = {"sleep imported by name", "an alias of time"}   # see below: harmless, the patch does not reach them


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: every harmful mutation refused.")
    ap.parse_args(argv)
    bad = []
    try:
        check_loop(SRC)
        print("flwr 1.42's own loop                     accepted")
    except RuntimeError as e:
        bad.append(f"the real loop refused: {e}")
    for name, src in MUTATIONS.items():
        assert src != SRC, name
        compile(src, name, "exec")                 # every mutation is a loop Python would run
        try:
            check_loop(src)
            verdict = "accepted"
        except RuntimeError:
            verdict = "refused"
        harmless = name in EXPECT_ACCEPTED
        print(f"{name:40s} {verdict}" + (" (the patched `time` does not reach this wait: Flower's own 3 s stays)"
                                          if harmless and verdict == "accepted" else ""))
        if verdict == "accepted" and not harmless:
            bad.append(f"mutation '{name}' accepted")
    # patching twice: the second quick_object_pulls must refuse (it would stack partials, or undo a user's change)
    mod = types.SimpleNamespace(**{k: getattr(loop, k) for k in ("time", "_pull_and_store_message", "pull_objects")},
                                __name__="copy of start_client_internal")
    quick_object_pulls(mod)
    try:
        quick_object_pulls(mod); bad.append("a second quick_object_pulls on a patched module was accepted")
        print("quick_object_pulls twice                 accepted")
    except RuntimeError:
        print("quick_object_pulls twice                 refused")
    clock = SuperNodeClock(Backoff(0.05, 3.0), 0.02)
    waits = []
    for _ in range(40):
        clock.backoff.pulled(False); waits.append(clock.backoff.wait)
    clock.backoff.pulled(True)
    print(f"backoff after 1..40 empty pulls           {min(waits):g} s to {max(waits):g} s; after a message {clock.backoff.wait:g} s")
    if min(waits) < 0.05 or max(waits) > 3.0 or clock.backoff.wait != 0.05:
        bad.append("the backoff left [first, cap]")
    print(f"after a message, any number of failed pulls (raised: Backoff.pulled never called): {clock.backoff.wait:g} s "
          "(the wait a '3 s becomes a reconnect wait' loop would reconnect at)")
    try:
        clock.sleep(1.0); bad.append("SuperNodeClock.sleep accepted a wait it does not know (1 s)")
    except ValueError:
        print("SuperNodeClock.sleep(1) (unknown wait)   refused")
    if bad:
        sys.exit("BROKEN: " + "; ".join(bad))
    print("held: every mutation that would change a wait the backoff does not own was refused")


if __name__ == "__main__":
    main()

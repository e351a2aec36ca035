#!/usr/bin/env python3
"""Writes the data directories of today's on-disk formats into
crates/tessera/tests/fixtures/format-N/ (N: the format this build writes), for the test that
every later release opens them (crates/tessera/tests/formats.rs).

Run once per format, when a release is about to change one: the fixtures of every earlier
format stay committed as they were written.

    scripts/make-format-fixtures.py [--bin target/release/tessera]

It starts `tessera dev` twice on fresh directories, standalone and as a local cluster (one
coordinator, three servers, every region on two), gives each the space of SPACE, puts the
objects of `objects()`, deletes and updates some, stops the daemon with SIGTERM, and packs both
data directories into data.tar.gz. What the space must hold afterwards is written by this script's own model of
those writes (not by reading Tessera) to objects.jsonl, one object a line, sorted by key.
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SPACE = """space hotels
key id
attributes string city, int stars, int price, float rating, set(string) tags
subspace city, price
subspace stars
create 16 partitions
"""

CITIES = ["Ithaca", "Boston", "Oslo", "Lyon"]


def objects():
    """The objects first put, by key."""
    out = {}
    for n in range(40):
        out[f"h{n:02}"] = {
            "city": CITIES[n % len(CITIES)],
            "stars": 1 + n % 5,
            "price": 40 + 7 * n,
            "rating": (n % 10) / 2,
            "tags": sorted({"wifi", ["pool", "spa", "bar"][n % 3]}),
        }
    return out


def run(bin_, addr, *args, stdin=""):
    done = subprocess.run([bin_, *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, "TESSERA_ADDR": addr}, timeout=60)
    if done.returncode != 0:
        sys.exit(f"tessera {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def start(bin_, data, extra):
    dev = subprocess.Popen([bin_, "dev", *extra, "--listen", "127.0.0.1:0", "--data-dir", data],
                           stdout=subprocess.PIPE, text=True)
    line = dev.stdout.readline()
    if "ready on " not in line:
        dev.kill()
        sys.exit(f"tessera dev did not start: {line!r}")
    return dev, line.split("ready on ")[1].split(",")[0].split(" ")[0]


def stop(dev):
    dev.send_signal(signal.SIGTERM)
    if dev.wait(timeout=60) != 0:
        sys.exit(f"tessera dev exited {dev.returncode}")


def write_space(bin_, addr, description):
    """The writes every fixture holds; returns the model of what the space holds after them."""
    run(bin_, addr, "add-space", stdin=description)
    model = objects()
    for key, obj in model.items():
        run(bin_, addr, "put", "hotels", key, json.dumps(obj))
    for n in range(0, 40, 8):
        run(bin_, addr, "del", "hotels", f"h{n:02}")
        del model[f"h{n:02}"]
    for n in range(1, 40, 8):
        run(bin_, addr, "put", "hotels", f"h{n:02}", json.dumps({"price": 999, "city": "Paris"}))
        model[f"h{n:02}"].update(price=999, city="Paris")
    return model


def settled(bin_, addr):
    """Waits until the cluster has no state transfer under way (at most a minute)."""
    for _ in range(600):
        status = json.loads(run(bin_, addr, "status", "--json"))
        if not any(space.get("transfers") for space in status.get("spaces", [])):
            return
        time.sleep(0.1)
    sys.exit("transfers still under way after a minute")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/tessera"))
    parser.add_argument("--format", help="the format the binary writes, for one that does not "
                        "say it (the releases of format 1 before `tessera --version` did)")
    args = parser.parse_args()
    bin_ = args.bin
    number = args.format
    if number is None:
        # "tessera 0.1.0 (protocol 4; data formats: server 1, coordinator 1)"
        version = run(bin_, "", "--version").replace(",", " ").replace(")", " ").split()
        number = version[version.index("server") + 1] if "server" in version else None
    if number is None or not number.isdigit():
        sys.exit(f"`tessera --version` does not say its data format: give --format")
    out = os.path.join(ROOT, f"crates/tessera/tests/fixtures/format-{number}")
    if os.path.exists(out):
        sys.exit(f"{out} exists: the fixtures of a format are written once")
    work = tempfile.mkdtemp(prefix="tessera-fixtures.")
    try:
        models = {}
        for name, extra, description in [
            ("standalone", [], SPACE),
            ("cluster", ["--servers", "3"], SPACE + "tolerate 1 failure\n"),
        ]:
            data = os.path.join(work, name)
            dev, addr = start(bin_, data, extra)
            models[name] = write_space(bin_, addr, description)
            if extra:
                settled(bin_, addr)
            stop(dev)
        assert models["standalone"] == models["cluster"]
        os.makedirs(out)
        # Compressed: a store's journal is preallocated (64 MiB of mostly zeros).
        subprocess.run(["tar", "-czf", os.path.join(out, "data.tar.gz"), "-C", work,
                        "standalone", "cluster"], check=True)
        with open(os.path.join(out, "objects.jsonl"), "w") as f:
            for key in sorted(models["standalone"]):
                f.write(json.dumps({"id": key, **models["standalone"][key]}, sort_keys=True) + "\n")
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=ROOT).stdout.strip()
        with open(os.path.join(out, "README.md"), "w") as f:
            f.write(f"Data directories of format {number}, written by `scripts/make-format-fixtures.py"
                    f" --bin {os.path.relpath(bin_, ROOT) if bin_.startswith(ROOT) else bin_}"
                    f"{' --format ' + number if args.format else ''}` (the script at commit {commit}),"
                    f" in `data.tar.gz`: `standalone/` (`tessera dev`) and `cluster/` (`tessera dev"
                    f" --servers 3`), each holding the space `hotels` of that script with the objects"
                    f" of `objects.jsonl`. Never rewritten: crates/tessera/tests/formats.rs opens"
                    f" them with every later release.\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(out)


if __name__ == "__main__":
    main()

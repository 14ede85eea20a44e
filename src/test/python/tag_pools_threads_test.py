"""Threads over the Python module where vmmkit serves the tags only (the stand-in ``torch`` of
standin_torch.py): four threads each allocate into a tag of their own, keeping its contents, free
some of their tensors (cached in the tag's pool) and check the rest inside their regions. A fifth
thread pauses and resumes each worker's tag while that worker is between regions and the others
allocate, tries other tags (refused, 800, while a region of theirs is open; a region of a paused
tag is refused, 2, and tried again), and now and then every tag. Nothing else may fail, and every
tensor's bytes must come through every cycle.
argv[1]: the libcudart to load. Prints "ok python-tag-pools-threads ..." and exits 0, or raises."""
import ctypes
import random
import sys
import threading

import vmmkit
from device_copies import download, upload
from standin_torch import delete, empty
import standin_torch

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
standin_torch.install(cudart)
KIB = 1 << 10
WORKERS, STEPS, CYCLES = 4, 25, 40
SIZES = (64 * KIB, 256 * KIB, 1024 * KIB + 4 * KIB)

failures = []
kept = {}  # block -> the bytes it must hold, for every worker's live tensors
counts = {"pauses": 0, "pauses refused": 0, "regions refused": 0}
counts_lock = threading.Lock()
quiet = [threading.Event() for _ in range(WORKERS)]  # the worker is between regions
go = [threading.Event() for _ in range(WORKERS)]     # the pauser is done with its tag for now
pauser_done = threading.Event()
resumes = threading.Condition()  # .count: the pauser's resumes so far
resumes.count = 0


def count(what):
    with counts_lock:
        counts[what] += 1


def enter_region_and(tag, work):
    """Runs work() in a region of the tag; while the tag is paused, waits for the pauser's next resume."""
    while True:
        with resumes:
            seen = resumes.count
        try:
            with vmmkit.region(tag, keep_contents=True):
                return work()
        except vmmkit.VmmkitError as e:
            if e.code != 2 or "paused" not in str(e):
                raise
            count("regions refused")
            with resumes:
                resumes.wait_for(lambda: resumes.count != seen)


def resumed():
    """Counts a resume (or the pauser's end) and wakes the workers waiting for one."""
    with resumes:
        resumes.count += 1
        resumes.notify_all()


def worker(index):
    """STEPS regions of the worker's tag, each allocating a tensor and checking one; between them the
    worker waits, outside any region and touching none of its memory, while the pauser may pause
    and resume its tag."""
    rng = random.Random(index)
    tag = "t%d" % index
    mine = []

    def step(k):
        size = rng.choice(SIZES)
        block = empty(size)
        data = bytes((index * 31 + k * 7 + i) % 251 for i in range(size))
        upload(cudart, block, data)
        mine.append(block)
        kept[block] = data
        if len(mine) > 3 and rng.random() < 0.3:  # freed into the tag's pool, handed out again later
            gone = mine.pop(rng.randrange(len(mine)))
            del kept[gone]
            delete(gone)
        check = mine[rng.randrange(len(mine))]  # inside the region: no pause of the tag can run
        assert download(cudart, check, len(kept[check])) == kept[check], "%s: a tensor changed" % tag

    try:
        for k in range(STEPS):
            enter_region_and(tag, lambda: step(k))
            quiet[index].set()
            go[index].wait()
            if not pauser_done.is_set():
                go[index].clear()
    except BaseException as e:
        failures.append(e)
        quiet[index].set()  # the pauser must not wait for it


def pause_and_resume(tag):
    """One pause and resume; False when refused because a region of the tag (or of any tag, for
    None) is open."""
    try:
        vmmkit.pause(tag)
    except vmmkit.VmmkitError as e:
        if e.code != 800:
            raise
        count("pauses refused")
        return False
    count("pauses")
    vmmkit.resume(tag)
    resumed()
    return True


def pauser():
    """Each step, for each worker once it is between regions: pauses and resumes its tag (the other
    workers meanwhile in regions of theirs, or between them), tries one other tag (refused while
    its worker is in a region, done otherwise) and now and then every tag."""
    rng = random.Random(99)
    try:
        for k in range(STEPS):
            for index in rng.sample(range(WORKERS), WORKERS):
                quiet[index].wait()
                quiet[index].clear()
                if failures:
                    return
                assert pause_and_resume("t%d" % index), "a pause of a quiet worker's tag was refused"
                other = rng.randrange(WORKERS)
                if other != index and k > 0:  # every tag exists from the second step on
                    pause_and_resume("t%d" % other)
                if rng.random() < 0.1:
                    pause_and_resume(None)
                go[index].set()
    except BaseException as e:
        failures.append(e)
    finally:
        pauser_done.set()  # no worker waits for a pauser that has stopped
        for event in go:
            event.set()
        resumed()


threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(WORKERS)]
controller = threading.Thread(target=pauser, daemon=True)
for t in threads + [controller]:
    t.start()
for t in threads + [controller]:
    t.join()
assert not failures, failures
vmmkit.pause()  # all quiet: every tag at once, its bytes kept
vmmkit.resume()
for block, data in kept.items():
    assert download(cudart, block, len(data)) == data, "a tensor changed across the pauses"
assert counts["pauses"] >= WORKERS * STEPS, counts
print("ok python-tag-pools-threads %s, %d tensors" % (counts, len(kept)))

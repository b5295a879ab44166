"""The GIL is released while items are prepared and executed; two runtimes
in two threads work, and one runtime shared by threads is serialised."""

import threading

import numpy as np

import encgraph
from pyhelpers import QUIET, QWEN, TOY, image

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def test_two_runtimes_in_two_threads():
    items = {"toy": [image(56, 56 + 28 * k, k) for k in range(6)],
             "qwen": [image(56, 56 + 28 * k, k) for k in range(6)]}
    configs = {"toy": TOY, "qwen": QWEN}
    alone = {}
    for name, config in configs.items():
        rt = encgraph.Runtime(config, **QUIET)
        alone[name] = [r.numpy() for r in rt.encode(images=items[name])]
    runtimes = {name: encgraph.Runtime(config, **QUIET) for name, config in configs.items()}
    got, errors = {}, []

    def work(name):
        try:
            out = []
            for _ in range(5):
                out = [r.numpy() for r in runtimes[name].encode(images=items[name])]
            got[name] = out
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in configs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in configs:
        for a, b in zip(alone[name], got[name]):
            np.testing.assert_allclose(b, a, **TOLERANCE)


def test_gil_released_during_encode():
    # One long request (every item in it): if the GIL were held through
    # prepare and execute, this thread would not run until it ended.
    rt = encgraph.Runtime(QWEN, workload__request_size=64, **QUIET)
    items = [image(224, 224, k) for k in range(48)]
    done = threading.Event()

    def work():
        rt.encode(images=items)
        done.set()

    worker = threading.Thread(target=work)
    ticks = 0
    worker.start()
    while not done.is_set():
        ticks += 1
        done.wait(0.001)
    worker.join()
    assert ticks > 50


def test_one_runtime_shared_by_threads():
    rt = encgraph.Runtime(TOY, **QUIET)
    pixels = image(56, 84, 9)
    expected = rt.encode(images=[pixels])[0].numpy()
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(rt.encode(images=[pixels])[0].numpy())
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 80
    for r in results:
        np.testing.assert_array_equal(r, expected)

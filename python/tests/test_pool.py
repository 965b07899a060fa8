"""gpulane.worker_pool() and gpulane.spawn(): each process holds its own lease."""

from __future__ import annotations

import multiprocessing

import pool_tasks

import gpulane


def test_pool_of_four_workers_on_four_gpus_each_sees_one_distinct_gpu(machine4):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    pool = gpulane.worker_pool(processes=4, gpus_per_worker=1, initializer=pool_tasks.set_barrier,
                               initargs=(barrier,))
    try:
        seen = pool.map(pool_tasks.where_am_i, range(4), chunksize=1)
    finally:
        pool.close()
        pool.join()
    pids = {pid for pid, _, _ in seen}
    visible = sorted(cvd for _, cvd, _ in seen)
    uuids = sorted(u for _, _, u in seen)
    assert len(pids) == 4, seen
    assert visible == ["0", "1", "2", "3"], seen  # one GPU each, all different
    assert uuids == sorted(machine4.uuid(i) for i in range(4)), seen
    # The workers are gone: their leases with them.
    assert [g.held_by for g in gpulane.status()] == [None] * 4


def test_spawn_runs_the_target_on_its_own_gpus(machine4):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with gpulane.lease(n=3) as mine:
        proc = gpulane.spawn(pool_tasks.report, args=(queue,), gpus=1, no_wait=True)
        cvd, uuids = queue.get(timeout=120)
        proc.join(timeout=120)
    assert proc.exitcode == 0
    # Inside this process's lease the spawned process leases among its GPUs: one of the three.
    assert len(uuids) == 1 and uuids[0] in mine.uuids, (uuids, mine.uuids)
    assert cvd == str(mine.indices[mine.uuids.index(uuids[0])])


def test_spawn_without_an_enclosing_lease(machine4):
    ctx = multiprocessing.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(2)  # both hold their leases until both reported
    procs = [gpulane.spawn(pool_tasks.report, args=(queue, barrier), gpus=2) for _ in range(2)]
    got = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    all_uuids = [u for _, uuids in got for u in uuids]
    assert sorted(all_uuids) == sorted(machine4.uuid(i) for i in range(4)), got


def test_more_workers_than_gpus_is_warned_of(machine2, recwarn):
    pool = gpulane.worker_pool(processes=3, gpus_per_worker=1)
    pool.terminate()
    pool.join()
    said = [str(w.message) for w in recwarn.list if issubclass(w.category, RuntimeWarning)]
    assert any("3 workers of 1 GPU(s) each need 3 GPUs but 2 can be leased here" in m and "processes=2" in m
               for m in said), said
    recwarn.clear()
    pool = gpulane.worker_pool(processes=2, gpus_per_worker=1)
    pool.terminate()
    pool.join()
    assert not [w for w in recwarn.list if "worker_pool" in str(w.message)]

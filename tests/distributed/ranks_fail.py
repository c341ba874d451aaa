"""Ranks that fail in different ways (run by tests/test_distributed.py): ``raise`` (an exception
on rank 1), ``die`` (rank 1 ends without a word in the middle of the job), ``timeout`` (rank 1
skips a collective: rank 0 must get an error after its 2 s timeout, not hang)."""

import os
import sys
import time

import tensorplay as tp
import tensorplay.distributed as dist

mode = sys.argv[1]
dist.init_process_group(timeout=2.0 if mode == "timeout" else 60.0)
r = dist.get_rank()
t = tp.ones(4)
dist.all_reduce(t)
print("first all_reduce done")
if r == 1:
    if mode == "raise":
        raise ValueError("rank 1 gives up")
    if mode == "die":
        os._exit(7)
    if mode == "timeout":
        time.sleep(30)  # alive, but never joins the next collective
        sys.exit(0)
dist.all_reduce(t)  # rank 0 waits here for rank 1
time.sleep(60)
print("rank 0 was not stopped")

# Copyright (c) executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which inputs a method reads in host memory, as the guard reads them from its program
(exir/_program_plan.py), for each kind of program that decides it; and programs that the
guard cannot read, which run as ExecuTorch alone runs them."""

import json
import os
import random
import re
import struct
import unittest
from typing import Any

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
    XnnpackPartitioner,
)
from executorch.exir import to_edge_transform_and_lower
from torch.export import export

from executorch_device_guard import _release
from executorch_device_guard._program_plan import input_plans
from executorch_device_guard._runtime_sites import plans_of
from test.support.guard import guard_set
from test.support.models import Add, device_inputs_program, host_program
from test.support.parts import not_here
from test.support.simulated_device import simulate_device, simulated_is_cpu

RUNTIME_UNAVAILABLE = not_here("runtime")


class TestProgramPlan(unittest.TestCase):
    def test_a_host_program_reads_its_inputs_on_the_host(self) -> None:
        for planned in (True, False):
            with self.subTest(planned=planned):
                self.assertEqual(
                    input_plans(host_program(planned)), {"forward": {0, 1}}
                )

    @unittest.skipIf(
        _release.before("1.4.0"),
        "before executorch 1.4.0 no program plans a method's inputs on a device",
    )
    def test_inputs_planned_on_the_device_are_not_read_on_the_host(self) -> None:
        self.assertEqual(input_plans(device_inputs_program()), {"forward": set()})

    def test_a_cuda_backend_method_takes_device_inputs_only_before_1_4_0(self) -> None:
        """From 1.4.0 a CUDA method's inputs are planned on the host, as the program says;
        before, the CUDA backend takes device inputs itself."""
        program = export(Add(), (torch.ones(2, 4), torch.ones(2, 4)))
        lowered = to_edge_transform_and_lower(
            program, partitioner=[XnnpackPartitioner()]
        )
        buffer = lowered.to_executorch().buffer
        self.assertEqual(input_plans(buffer), {"forward": {0, 1}})
        # The delegate's id, a flatbuffer string (length, bytes, NUL), renamed in place.
        at = buffer.index(b"XnnpackBackend")
        cuda = struct.pack("<I", 11) + b"CudaBackend\0\0\0"
        renamed = buffer[: at - 4] + cuda + buffer[at + len("XnnpackBackend") :]
        expected = set() if _release.before("1.4.0") else {0, 1}
        self.assertEqual(input_plans(renamed), {"forward": expected})


def corrupted(program: bytes, count: int) -> dict[str, bytes]:
    """`program` with its top bit of one byte flipped, at each byte where that leaves a program
    that the guard cannot read, and at the first `count` seeded bytes where it can (most flips
    do not touch what it reads); and truncated at the first `count` seeded lengths that the
    guard cannot read and `count` that it can."""
    rng = random.Random(0)
    found: dict[str, bytes] = {}
    readable = 0
    for at in rng.sample(range(len(program)), len(program)):
        flipped = bytearray(program)
        flipped[at] ^= 0x80
        unread = plans_of(bytes(flipped)) is None
        if unread or readable < count:
            found[f"top bit of byte {at} flipped"] = bytes(flipped)
            readable += not unread
    kept = {True: 0, False: 0}
    for end in rng.sample(range(len(program)), len(program)):
        unread = plans_of(program[:end]) is None
        if kept[unread] < count:
            found[f"truncated to {end}"] = program[:end]
            kept[unread] += 1
    return found


def ending(program: bytes, verification: Any, guard: bool, device: bool) -> str:
    """How loading `program` and running its forward on x and y (y in simulated device memory
    where `device`) ends, in a child forked from this process: a signal, the exception it
    raised (addresses left out), or the result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        try:
            with guard_set(guard), simulated_is_cpu():
                from executorch.runtime import Runtime

                inputs = [torch.ones(2, 4), torch.ones(2, 4)]
                if device:
                    simulate_device(inputs[1])
                try:
                    loaded = Runtime.get().load_program(
                        program, verification=verification
                    )
                    method = loaded.load_method("forward")
                    found = f"ran: {method.execute(inputs)}"
                except Exception as error:  # whichever ExecuTorch raises
                    text = re.sub(r" at 0x[0-9a-f]+", "", str(error))
                    found = f"{type(error).__name__}: {text}"
            os.write(write, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        sent = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return json.loads(sent)


@unittest.skipUnless(hasattr(os, "fork"), "a corrupted program may crash ExecuTorch")
@unittest.skipIf(RUNTIME_UNAVAILABLE is not None, str(RUNTIME_UNAVAILABLE))
class TestUnreadablePrograms(unittest.TestCase):
    def test_corrupted_programs_run_as_unguarded_and_device_inputs_raise(self) -> None:
        """Each corrupted program (corrupted()) under each Verification level, guard off and on, in forked children (ExecuTorch itself may crash
        on one): host inputs end as unguarded; a device
        input is refused with the guard's error, or, where the guard could read the program
        and it plans that input on the device, ends as unguarded. Nothing of the guard's own
        reading (struct.error, UnicodeDecodeError, BufferError...) ever escapes."""
        from executorch.runtime import Verification

        refused = "RuntimeError: Input 1 of method 'forward' (shape [2, 4], dtype "
        for name, program in corrupted(host_program(True), 12).items():
            for verification in Verification.__members__.values():
                # Unverified, ExecuTorch reads a truncated program past its end: what it finds
                # there, not the program, decides how it ends, and differs from one process's
                # memory to another's.
                if (
                    name.startswith("truncated")
                    and verification == Verification.Minimal
                ):
                    continue
                for device in (False, True):
                    with self.subTest(name, verification=verification, device=device):
                        on = ending(program, verification, True, device)
                        off = ending(program, verification, False, device)
                        if not (
                            off.startswith("signal")
                            or device
                            and on.startswith(refused)
                        ):
                            self.assertEqual(on, off)

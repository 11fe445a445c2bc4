# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Runs rdma-core's own test suite (tests/ from Debian's python3-pyverbs,
# unpacked in XS_SUITE_DIR) as its run_tests.py does, with two changes for
# a device that lives in the process: an RDMA device without a sysfs
# netdev gets XS_SUITE_IP as its address (test_rdmacm's tests otherwise
# skip: "doesn't have net interface"), and with XS_SUITE_NOSKIP=1 a skipped
# test fails the run (the cases named are ones that must run).
import os
import sys
import unittest

top = os.environ['XS_SUITE_DIR']
sys.path[0:0] = [top, os.path.join(top, 'tests')]
from args_parser import parser  # noqa: E402

parser.parse_args()
import tests.base as base  # noqa: E402

ip = os.environ.get('XS_SUITE_IP', '127.0.0.1')
sysfs_get_ip_mac = base.RDMATestCase._get_ip_mac


def _get_ip_mac(self, dev, port, idx):
    if os.path.exists('/sys/class/infiniband/{}/device/net/'.format(dev)):
        return sysfs_get_ip_mac(self, dev, port, idx)
    self.args.append([dev, port, idx, ip, None])


base.RDMATestCase._get_ip_mac = _get_ip_mac
import tests  # noqa: E402

prog = unittest.main(module=tests, exit=False)
res = prog.result
if os.environ.get('XS_SUITE_NOSKIP') == '1' and res.skipped:
    for t, why in res.skipped:
        print('FAIL: skipped: %s: %s' % (t.id(), why))
    sys.exit(1)
sys.exit(0 if res.wasSuccessful() else 1)

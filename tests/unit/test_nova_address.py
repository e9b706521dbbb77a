# SPDX-License-Identifier: Apache-2.0
"""nova_ext.virt.address: where the source agent connects to."""

import pytest

from nova_ext.virt import address


@pytest.mark.parametrize('listen, configured, my_ip, expected', [
    ('10.0.0.5:7440', None, '192.0.2.2', '10.0.0.5:7440'),
    ('0.0.0.0:7440', None, '192.0.2.2', '192.0.2.2:7440'),
    ('[::]:7440', None, '2001:db8::2', '[2001:db8::2]:7440'),
    ('0.0.0.0:7440', None, None, '0.0.0.0:7440'),
    ('0.0.0.0:7440', 'mig.cmp2:7000', '192.0.2.2', 'mig.cmp2:7000'),
    ('10.0.0.5:7440', 'mig.cmp2:7000', None, 'mig.cmp2:7000'),
])
def test_advertised(listen, configured, my_ip, expected):
    assert address.advertised(listen, configured, my_ip) == expected

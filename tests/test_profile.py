"""Bad profiles are refused with a message naming the field, before any
domain, overlay or image is created."""

import pytest

from conftest import STATE_DIR, domains, playbook, tagged

BAD = [
    (["lab_slots=0"], "lab_slots"),
    (["lab_slots=4", "lab_drives=5"], "lab_drives"),
    (["lab_slots=233"], "lab_slots"),
    ([{"lab_slots": 3, "lab_drives": 1, "lab_slot_numbers": [1, 2, 2]}], "duplicate chassis/slot"),
    (["lab_kernel_variant=vanilla"], "lab_kernel_variant"),
    ([{"lab_scenarios": ["smoke", "no-such-scenario"]}], "no-such-scenario"),
    (["lab_vms=0"], "lab_vms"),
    (["lab_slots=many"], "lab_slots"),
    ([{"lab_aer_errors": ["SDN; quit"]}], "lab_aer_errors"),
    (["lab_attention_button=false"], "needs lab_platform=fidelity"),
    ([{"lab_platform": "fidelity", "lab_attention_button": False, "lab_scenarios": ["smoke", "storm"]}],
     "press the Attention Button"),
    (["lab_dpc=true"], "lab_dpc=true needs lab_platform=fidelity"),
    ([{"lab_platform": "fidelity", "lab_scenarios": ["dpc-surprise-down"]}], "dpc-surprise-down needs lab_dpc=true"),
]


@pytest.mark.parametrize("extra,needle", BAD, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD)])
def test_bad_profile_is_refused_before_anything_is_created(extra, needle):
    # only this test's names: other runs on the host come and go meanwhile
    prefix = tagged("pciehp-badprofile")
    r = playbook(*extra, "lab_name_prefix=" + prefix, "lab_run_id=" + tagged("test-bad-profile"))
    assert r.returncode != 0
    assert needle in r.stdout, r.stdout[-3000:]
    assert "profile field" in r.stdout or "duplicate" in r.stdout
    assert "PLAY [Set up the hypervisor hosts]" not in r.stdout, "refusal came after host setup began"
    assert not [d for d in domains() if d.startswith(prefix)]
    assert not list((STATE_DIR / "vms").glob(prefix + "*"))

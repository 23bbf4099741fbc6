"""The lab's topology: profile validation and the slot-to-drive map.

This is the one place that decides where root ports sit on pcie.0, which
(chassis, slot) each gets and which slots hold a drive at boot. The domain
template, the actuator's callers and the scenarios all read the map this
produces; nothing else computes addresses.
"""

import os
import re
import sys

from ansible.errors import AnsibleFilterError

# the profile's declaration and its checks (lab_profile.py, beside this file)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_profile import check_value, load_schema  # noqa: E402

# Every range, choice and default of a profile field is the declaration's
# (lab/profile.yml, which says what each is), listed only there.
VARIABLES = load_schema()["variables"]
DEFAULTS = {name: spec.get("default") for name, spec in VARIABLES.items()}
KERNEL_VARIANTS = tuple(VARIABLES["lab_kernel_variant"]["choices"])
# the variants a user's path makes, and the profile field that gives it
OWN_KERNELS = {"tree": "lab_kernel_tree", "image": "lab_kernel_image"}
PLATFORMS = tuple(VARIABLES["lab_platform"]["choices"])
# ACPI firmware of the root ports: plain is QEMU's own DSDT; thunderbolt adds
# an SSDT (domains/acpi/thunderbolt-port.asl.j2) to the slots it names.
FIRMWARES = tuple(VARIABLES["lab_firmware"]["choices"])

# pcie.0 device numbers that can hold root ports: 0x00 is the host bridge,
# 0x01 holds the lab's own virtio functions, 0x1f is the ICH9 LPC/SATA/SMBus.
PORT_DEVICES = list(range(0x02, 0x1F))
FUNCTIONS_PER_DEVICE = 8
# root ports pcie.0 can address: a VM's slots and one a JBOF share them
ROOT_PORTS = len(PORT_DEVICES) * FUNCTIONS_PER_DEVICE
MAX_SLOTS = VARIABLES["lab_slots"]["max"]

# The guest's own devices on 00:01.x (multifunction).
SYSTEM_DEVICE = 0x01

# JBOFs (Lightning-style enclosures): each is a PCIe switch -- one
# x3130-upstream port in a root port of its own, with xio3130-downstream
# hotplug ports below -- and JBOF j numbers its slots j*JBOF_SLOT_BASE
# (the root port: yanking it pulls the whole enclosure) and
# j*JBOF_SLOT_BASE + k for downstream port k, so that every physical slot
# number (/sys/bus/pci/slots/<n>) stays unique in the VM.
# The declared maxima keep to the hardware (tests/test_profile.py): JBOFs
# such that MAX_JBOFS * 1000 + MAX_JBOF_SLOTS stays inside the 13-bit slot
# number, and downstream ports on devices 0..31 of the switch's bus.
JBOF_SLOT_BASE = 1000
MAX_JBOFS = VARIABLES["lab_jbofs"]["max"]
MAX_JBOF_SLOTS = VARIABLES["lab_jbof_slots"]["max"]
# chassis numbers are 8 bits: JBOF j takes lab_chassis + j
MAX_CHASSIS = VARIABLES["lab_chassis"]["max"]
# libvirt numbers PCI controllers 0..255 and every bridge needs its own bus:
# pcie.0, one bus a root port, and a JBOF's upstream and downstream ports.
MAX_CONTROLLER_INDEX = 255
# What a scenario needs of the profile is declared in its own file, one
# header line "#   requires: {...}" (a YAML flow mapping, docs/writing-a-scenario.md),
# read by lab_scenario_requires; these are the keys it may use.
REQUIRES = {
    "attention_button": "it removes through the Attention Button (device_del)",
    "dpc": "its root ports need the DPC capability (lab_dpc=true, fidelity platform)",
    "jbofs": "JBOFs with drives, at least this many",
    "drives": "root-port slots with a drive at boot, at least this many",
    "drives_over": "more root-port slots with a drive at boot than the profile field it names",
    "firmware_on": "lab_firmware=thunderbolt on a slot of each kind listed: drive (a drive at boot), empty",
    "empty_slots": "root-port slots without a drive at boot, at least this many",
    "pci_hole64_mib": "lab_pci_hole64_mib exactly this (0: no 64-bit PCI window)",
}


def scenario_header_value(path, key):
    """The text after `#   KEY:` in a scenario file's header (its leading
    comment block), or None: the one reader of scenario headers, used here
    for requires and by the tests for ci."""
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            m = re.match(rf"#\s+{re.escape(key)}:\s*(.*)$", line.rstrip("\n"))
            if m:
                return m.group(1).strip()
    return None


def lab_scenario_requires(paths):
    """{scenario name: its requires mapping} from the header of each
    playbooks/scenarios/<name>.yml given (a file without the line needs
    nothing). A line that is no mapping, or names an unknown key, is
    refused, naming the file."""
    import os

    import yaml

    found = {}
    for path in paths:
        name = os.path.basename(path)[:-len(".yml")]
        need, text = {}, scenario_header_value(path, "requires")
        if text is not None:
            try:
                need = yaml.safe_load(text)
            except yaml.YAMLError as e:
                raise AnsibleFilterError(f"{path}: its requires line is no YAML mapping: {e}") from None
            if not isinstance(need, dict) or set(need) - set(REQUIRES):
                raise AnsibleFilterError(f"{path}: requires must be a mapping of "
                                         f"{', '.join(REQUIRES)}, not {text!r}")
        found[name] = need
    return found


def _repo_requires():
    """lab_scenario_requires of this checkout's playbooks/scenarios/*.yml."""
    import glob
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    return lab_scenario_requires(sorted(glob.glob(os.path.join(here, "..", "..", "..", "playbooks", "scenarios",
                                                               "*.yml"))))


def _check_requires(scenarios, requires, p, drive_numbers, firmware_slots):
    """Every scenario's requires against the validated profile fields."""
    pressed = [s for s in scenarios if requires.get(s, {}).get("attention_button")]
    if pressed and not p["lab_attention_button"]:
        raise AnsibleFilterError(f"profile field lab_scenarios: {', '.join(pressed)} press the Attention Button, which "
                                 f"lab_attention_button=false takes away: run them in another profile")
    for name in scenarios:
        need = requires.get(name, {})
        if need.get("dpc") and not p["lab_dpc"]:
            raise AnsibleFilterError(f"profile field lab_scenarios: {name} needs lab_dpc=true (and so "
                                     f"lab_platform=fidelity): without it the root ports have no DPC capability")
        jbofs = need.get("jbofs", 0)
        if jbofs and (p["lab_jbofs"] < jbofs or not p["lab_jbof_drives"]):
            raise AnsibleFilterError(f"profile field lab_scenarios: {name} needs at least {jbofs} JBOF(s) with "
                                     f"drives: set lab_jbofs (now {p['lab_jbofs']}) and lab_jbof_drives "
                                     f"(now {p['lab_jbof_drives']})")
        drives = need.get("drives", 0)
        if len(drive_numbers) < drives:
            raise AnsibleFilterError(f"profile field lab_scenarios: {name} needs at least {drives} root-port "
                                     f"slot(s) with a drive at boot: lab_drives is {len(drive_numbers)}")
        over = need.get("drives_over")
        if over and len(drive_numbers) <= int(p.get(over) or 0):
            raise AnsibleFilterError(f"profile field lab_scenarios: {name} needs more root-port slots with a drive "
                                     f"at boot than {over}={p.get(over)}: lab_drives is {len(drive_numbers)}")
        empty = need.get("empty_slots", 0)
        if p["lab_slots"] - len(drive_numbers) < empty:
            raise AnsibleFilterError(f"profile field lab_scenarios: {name} needs at least {empty} root-port slot(s) "
                                     f"without a drive at boot: lab_slots={p['lab_slots']}, "
                                     f"lab_drives={len(drive_numbers)}")
        if "pci_hole64_mib" in need and p["lab_pci_hole64_mib"] != need["pci_hole64_mib"]:
            raise AnsibleFilterError(f"profile field lab_scenarios: {name} needs lab_pci_hole64_mib="
                                     f"{need['pci_hole64_mib']} (now {p['lab_pci_hole64_mib']}): "
                                     f"{REQUIRES['pci_hole64_mib']}")
        kinds = need.get("firmware_on") or []
        tb = set(firmware_slots) if p["lab_firmware"] == "thunderbolt" else set()
        missing = [k for k in kinds if not (tb & set(drive_numbers) if k == "drive" else tb - set(drive_numbers))]
        if missing:
            raise AnsibleFilterError(
                f"profile field lab_scenarios: {name} needs lab_firmware=thunderbolt on a slot with a drive and on "
                f"an empty slot (missing: {', '.join(missing)}); e.g. -e lab_slots=4 -e lab_drives=2 -e lab_firmware=thunderbolt "
                f"-e '{{\"lab_firmware_slots\":[2,3]}}'")


def _field(p, name):
    """p's value of a declared int, bool or choice field, checked against
    its declaration (lab_profile_check has done so in a run; a test or tool
    may hand the profile straight here)."""
    return check_value(name, p[name], VARIABLES[name])


def lab_validate_profile(profile, known_scenarios):
    """Return the effective profile, or fail naming the field that is wrong.
    A field not given (a test's or tool's partial profile) has its declared
    default."""
    p = {**DEFAULTS, **profile}
    vms = _field(p, "lab_vms")
    jbofs = _field(p, "lab_jbofs")
    jbof_slots = _field(p, "lab_jbof_slots") if jbofs else 0
    jbof_drives = _field(p, "lab_jbof_drives") if jbofs else 0
    if jbof_drives > jbof_slots:
        raise AnsibleFilterError(f"profile field lab_jbof_drives={jbof_drives} is more than "
                                 f"lab_jbof_slots={jbof_slots}: every drive needs its own downstream port")
    slots = _field(p, "lab_slots")
    # a VM may have no root-port slot of its own when its drives are all in JBOFs
    if not slots and not jbofs:
        raise AnsibleFilterError("profile field lab_slots=0 leaves the VM without a slot: 0 only with JBOFs "
                                 "(lab_jbofs)")
    if slots + jbofs > ROOT_PORTS:
        raise AnsibleFilterError(f"profile field lab_slots={slots} is more than the topology can address: "
                                 f"with lab_jbofs={jbofs}, at most {ROOT_PORTS - jbofs}")
    drives = _field(p, "lab_drives")
    if drives > slots:
        raise AnsibleFilterError(f"profile field lab_drives={drives} is more than "
                                 f"lab_slots={slots}: every drive needs its own slot")
    iterations = _field(p, "lab_iterations")
    chassis = _field(p, "lab_chassis")
    variant = _field(p, "lab_kernel_variant")
    variants = _variants(p.get("lab_kernel_variants"), vms) or [variant]
    variants = _own_kernel_variants(p, variants, bool(p.get("lab_kernel_variants")))
    variant = variants[0]
    if _field(p, "lab_kernel_quick") and "tree" not in variants:
        raise AnsibleFilterError("profile field lab_kernel_quick=true needs lab_kernel_tree: it builds that tree's "
                                 "bzImage only")
    image_release = _bzimage_release(p["lab_kernel_image"]) if "image" in variants else ""
    platform = _field(p, "lab_platform")
    # fidelity platform: the emulated completion timeout (the declaration's
    # range ends at 1 s; the spec's default range ends at 50000 us)
    timeout_us = _field(p, "lab_completion_timeout_us")
    # what a field needs of another (lab_dpc needs lab_platform=fidelity, ...)
    # is declared in lab/profile.yml and checked by lab_profile_check
    button = _field(p, "lab_attention_button")
    dpc = _field(p, "lab_dpc")
    scenarios = p.get("lab_scenarios")
    if isinstance(scenarios, str):
        scenarios = [s.strip() for s in scenarios.split(",") if s.strip()]
    if not isinstance(scenarios, list) or not scenarios:
        raise AnsibleFilterError(f"profile field lab_scenarios={scenarios!r} must be a "
                                 f"non-empty list of scenario names")
    unknown = [s for s in scenarios if s not in known_scenarios]
    if unknown:
        raise AnsibleFilterError(f"profile field lab_scenarios names unknown scenario(s) "
                                 f"{', '.join(map(str, unknown))}: known are "
                                 f"{', '.join(sorted(known_scenarios))}")
    numbers = p.get("lab_slot_numbers") or list(range(1, slots + 1))
    if not isinstance(numbers, list) or len(numbers) != slots:
        raise AnsibleFilterError(f"profile field lab_slot_numbers must list exactly "
                                 f"lab_slots={slots} physical slot numbers")
    numbers = [check_value(f"lab_slot_numbers[{i}]", n, VARIABLES["lab_slot_numbers"]["item"])
               for i, n in enumerate(numbers)]
    seen = set()
    for n in numbers:
        if n in seen:
            raise AnsibleFilterError(f"profile field lab_slot_numbers has duplicate "
                                     f"chassis/slot {chassis}/{n}: QEMU needs each "
                                     f"(chassis, slot) pair once")
        seen.add(n)
    if jbofs:
        controllers = slots + jbofs * (jbof_slots + 2)
        if controllers > MAX_CONTROLLER_INDEX:
            raise AnsibleFilterError(
                f"profile fields lab_slots={slots}, lab_jbofs={jbofs}, lab_jbof_slots={jbof_slots} "
                f"need {controllers} PCI buses (one a root port, upstream and downstream port); "
                f"the topology has {MAX_CONTROLLER_INDEX}: use fewer JBOFs or slots")
        if chassis + jbofs > MAX_CHASSIS:
            raise AnsibleFilterError(f"profile field lab_chassis={chassis} leaves no chassis number for "
                                     f"{jbofs} JBOF(s) (JBOF j is chassis lab_chassis + j, at most {MAX_CHASSIS})")
        clash = sorted(n for n in numbers if n >= JBOF_SLOT_BASE and n // JBOF_SLOT_BASE <= jbofs
                       and n % JBOF_SLOT_BASE <= jbof_slots)
        if clash:
            raise AnsibleFilterError(f"profile field lab_slot_numbers has {clash[0]}, a JBOF slot number "
                                     f"(JBOF j uses {JBOF_SLOT_BASE}*j .. {JBOF_SLOT_BASE}*j+lab_jbof_slots): "
                                     f"number root-port slots below {JBOF_SLOT_BASE}")
    firmware, firmware_slots = _firmware(p, numbers)
    # a caller with names only (tests, tools) gets the requirements the
    # scenario files of this checkout declare
    requires = known_scenarios if isinstance(known_scenarios, dict) else _repo_requires()
    _check_requires(scenarios, requires,
                    {**p, "lab_attention_button": button, "lab_dpc": dpc, "lab_jbofs": jbofs,
                     "lab_jbof_drives": jbof_drives, "lab_firmware": firmware, "lab_slots": slots,
                     "lab_pci_hole64_mib": _field(p, "lab_pci_hole64_mib")},
                    numbers[:drives], firmware_slots)
    aer_errors, pattern = p["lab_aer_errors"], VARIABLES["lab_aer_errors"]["item"]["pattern"]
    if not isinstance(aer_errors, list) or not all(isinstance(e, str) and re.fullmatch(pattern, e) for e in aer_errors):
        raise AnsibleFilterError(f"profile field lab_aer_errors={aer_errors!r} must list QEMU "
                                 f"pcie_aer_inject_error names (COMP_TIME, SDN, ...) or 0xSTATUS values")
    p.update(lab_vms=vms, lab_slots=slots, lab_drives=drives, lab_iterations=iterations,
             lab_chassis=chassis, lab_kernel_variant=variant, lab_kernel_variants=variants,
             lab_platform=platform, lab_completion_timeout_us=timeout_us, lab_attention_button=button, lab_dpc=dpc,
             lab_scenarios=scenarios, lab_slot_numbers=numbers, lab_jbofs=jbofs,
             lab_jbof_slots=jbof_slots, lab_jbof_drives=jbof_drives,
             lab_firmware=firmware, lab_firmware_slots=firmware_slots, lab_kernel_image_release=image_release)
    return p


def _firmware(p, numbers):
    """lab_firmware and the physical slots that get it. QEMU's DSDT names
    only function-0 devices on pcie.0, so only their ports can carry the
    thunderbolt objects; an empty lab_firmware_slots means all of those."""
    firmware = _field(p, "lab_firmware")
    chosen = p["lab_firmware_slots"] or []
    if isinstance(chosen, str):
        chosen = [x.strip() for x in chosen.split(",") if x.strip()]
    if not isinstance(chosen, list):
        raise AnsibleFilterError(f"profile field lab_firmware_slots={chosen!r} must be a list "
                                 f"of physical slot numbers")
    if firmware == "plain":
        if chosen:
            raise AnsibleFilterError("profile field lab_firmware_slots is set but lab_firmware=plain: "
                                     "set lab_firmware=thunderbolt or leave the slots empty")
        return firmware, []
    named = [n for i, n in enumerate(numbers) if _port_address(i)[1] == 0]
    if not chosen:
        return firmware, named
    chosen = [check_value(f"lab_firmware_slots[{i}]", n, VARIABLES["lab_firmware_slots"]["item"])
              for i, n in enumerate(chosen)]
    for n in chosen:
        if n not in numbers:
            raise AnsibleFilterError(f"profile field lab_firmware_slots names slot {n}, which is not "
                                     f"one of the VM's slots {numbers}")
        if n not in named:
            raise AnsibleFilterError(f"profile field lab_firmware_slots names slot {n}, whose root port "
                                     f"is not function 0 of a pcie.0 device: QEMU's DSDT does not "
                                     f"describe it, so no ACPI object can be attached")
    if len(set(chosen)) != len(chosen):
        raise AnsibleFilterError(f"profile field lab_firmware_slots={chosen} names a slot twice")
    return firmware, chosen


def _variants(value, vms):
    """lab_kernel_variants: several kernels in one run, VMs take them in
    turn; empty means the one lab_kernel_variant."""
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise AnsibleFilterError(f"profile field lab_kernel_variants={value!r} must be a list "
                                 f"of kernel variants, e.g. [stock, patched]")
    unknown = [v for v in value if v not in KERNEL_VARIANTS]
    if unknown:
        raise AnsibleFilterError(f"profile field lab_kernel_variants names unknown variant(s) "
                                 f"{', '.join(map(str, unknown))}: use {', '.join(KERNEL_VARIANTS)}")
    if len(set(value)) != len(value):
        raise AnsibleFilterError(f"profile field lab_kernel_variants={value} names a variant twice")
    if len(value) > vms:
        raise AnsibleFilterError(f"profile field lab_kernel_variants lists {len(value)} variants "
                                 f"but lab_vms={vms}: every variant needs at least one VM")
    return list(value)


def _own_kernel_variants(p, variants, listed):
    """lab_kernel_tree (variant tree) or lab_kernel_image (variant image)
    given alone (lab_kernel_variant at its default and no
    lab_kernel_variants) is the run's kernel; otherwise some VM must boot
    it, and the variant needs its path."""
    given = {v: p.get(field) or "" for v, field in OWN_KERNELS.items()}
    if all(given.values()):
        raise AnsibleFilterError("profile fields lab_kernel_tree and lab_kernel_image are both set: a run builds "
                                 "a tree or boots a prebuilt kernel, give one of them")
    for v, field in OWN_KERNELS.items():
        if given[v] and v not in variants:
            if not listed and variants == ["patched"]:
                return [v]
            raise AnsibleFilterError(f"profile field {field}={given[v]} is set, but no VM boots it: "
                                     f"name {v} in lab_kernel_variants (e.g. [stock, {v}]) or lab_kernel_variant")
        if v in variants and not given[v]:
            raise AnsibleFilterError(f"profile field lab_kernel_variant(s) names {v}, which needs {field}: "
                                     f"the path of your kernel {'source or git tree' if v == 'tree' else 'bzImage'}")
    return variants


def _bzimage_release(path):
    """The kernel release an x86 bzImage names (its setup header's
    kernel_version string), or a refusal saying what the file is not."""
    try:
        with open(path, "rb") as f:
            head = f.read(0x10000)
    except OSError as e:
        raise AnsibleFilterError(f"profile field lab_kernel_image={path}: {e.strerror}") from None
    if head[0x202:0x206] != b"HdrS" or len(head) < 0x210:
        raise AnsibleFilterError(f"profile field lab_kernel_image={path} is no x86 bzImage (no setup header "
                                 f"'HdrS'): give arch/x86/boot/bzImage of a build")
    at = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    version = head[at:head.find(b"\0", at)].decode("ascii", "replace").split()
    if not version:
        raise AnsibleFilterError(f"profile field lab_kernel_image={path}: its setup header names no version")
    return version[0]


def lab_vm_variant(profile, vm_index):
    """The kernel variant of VM vm_index (1-based): the variants in turn."""
    variants = profile.get("lab_kernel_variants") or [profile["lab_kernel_variant"]]
    return variants[(int(vm_index) - 1) % len(variants)]


def _port_address(index):
    """pcie.0 address of the index-th root port (0-based).

    The first 29 ports take function 0 of devices 0x02..0x1e; further
    ports fill functions 1..7 of the same devices in order.
    """
    if index < len(PORT_DEVICES):
        return PORT_DEVICES[index], 0
    rest = index - len(PORT_DEVICES)
    return PORT_DEVICES[rest // (FUNCTIONS_PER_DEVICE - 1)], 1 + rest % (FUNCTIONS_PER_DEVICE - 1)


def _drive(vm_index, number):
    return {
        "id": f"nvme-s{number}",
        "node": f"drive-s{number}",
        "serial": f"lab{vm_index}-s{number}-g0",  # NVMe allows 20 chars
        "file": f"drive-s{number}.raw",
    }


def _root_ports(profile):
    """pcie.0 addresses of all root ports: the profile's slots, then one a
    JBOF; and the devices whose function 0 must be multifunction."""
    addresses = [_port_address(i) for i in range(profile["lab_slots"] + profile.get("lab_jbofs", 0))]
    return addresses, {dev for dev, fn in addresses if fn > 0}


def lab_slot_map(profile, vm_index):
    """The slot-to-drive map of one VM: one entry a hotplug slot that can
    hold a drive -- the root-port slots first, then the downstream ports
    of every JBOF (entries with a 'jbof' number; lab_jbof_map has the
    switches themselves)."""
    slots = profile["lab_slots"]
    addresses, multi = _root_ports(profile)
    result = []
    for i, (dev, fn) in enumerate(addresses[:slots]):
        number = profile["lab_slot_numbers"][i]
        entry = {
            "index": i + 1,               # libvirt controller index
            "alias": f"pci.{i + 1}",      # QEMU id of the root port
            "chassis": profile["lab_chassis"],
            "slot": number,               # physical slot: /sys/bus/pci/slots/<slot>
            "port": (i + 1) % 256,        # PCIe port number in Link Capabilities
            "bus0_device": dev,
            "bus0_function": fn,
            "address": f"00:{dev:02x}.{fn}",
            "multifunction": fn == 0 and dev in multi,
            "jbof": None,
            "drive": None,
            "firmware": "plain",
        }
        firmware_slots = profile.get("lab_firmware_slots") or []
        if number in firmware_slots:
            devfn = dev << 3 | fn
            entry.update(firmware=profile["lab_firmware"],
                         acpi_name=f"S{devfn:02X}",          # QEMU's DSDT: \_SB.PCI0.S<devfn>
                         power_resource=f"PW{devfn:02X}",
                         uid=firmware_slots.index(number))  # ExternalFacingPort UID
        if i < profile["lab_drives"]:
            entry["drive"] = _drive(vm_index, number)
        result.append(entry)
    for jbof in lab_jbof_map(profile, vm_index):
        result += jbof["slots"]
    return result


def lab_jbof_map(profile, vm_index):
    """The JBOFs of one VM: for each, the root port it hangs off (its slot
    is what a whole-JBOF yank removes), the switch's upstream port, and its
    downstream-port slots (the same entries lab_slot_map lists), drives in
    the first lab_jbof_drives of them."""
    jbofs = profile.get("lab_jbofs", 0)
    if not jbofs:
        return []
    slots, per = profile["lab_slots"], profile["lab_jbof_slots"]
    addresses, multi = _root_ports(profile)
    result = []
    for j in range(1, jbofs + 1):
        root = slots + (j - 1) * (per + 2) + 1      # controller indices: root, upstream, downstream...
        dev, fn = addresses[slots + j - 1]
        base = j * JBOF_SLOT_BASE
        chassis = profile["lab_chassis"] + j
        downstream = []
        for k in range(1, per + 1):
            number = base + k
            downstream.append({
                "index": root + 1 + k,
                "alias": f"pci.{root + 1 + k}",
                "chassis": chassis,
                "slot": number,
                "port": k,                  # port number inside the switch
                "switch_device": k - 1,     # device number on the switch's internal bus
                "upstream_alias": f"pci.{root + 1}",
                "root_slot": base,
                "bus0_device": None,
                "bus0_function": None,
                "address": None,            # the guest numbers the buses: see hpslot status
                "multifunction": False,
                "jbof": j,
                "drive": _drive(vm_index, number) if k <= profile["lab_jbof_drives"] else None,
            })
        result.append({
            "jbof": j,
            "slot": base,                   # the root port's physical slot: the JBOF's cable
            "chassis": chassis,
            "root": {"index": root, "alias": f"pci.{root}", "chassis": profile["lab_chassis"], "slot": base,
                     "port": root % 256, "bus0_device": dev, "bus0_function": fn,
                     "address": f"00:{dev:02x}.{fn}", "multifunction": fn == 0 and dev in multi},
            "upstream": {"index": root + 1, "alias": f"pci.{root + 1}"},
            "slots": downstream,
            "drive_slots": [d["slot"] for d in downstream if d["drive"]],
        })
    return result


def lab_acpi_ports(slot_map):
    """The root ports of a slot map that carry firmware objects (the SSDT's input)."""
    return [s for s in slot_map if s.get("firmware", "plain") != "plain"]


def lab_domain_difference(want, had):
    """Where a kept VM's domain XML (had: the text it was defined from, or
    None) differs from the one a profile renders now (want): "" when they
    are the same, else "line N: wants ..., defined with ..." (lab_rerun,
    roles/vm/tasks/keep.yml)."""
    if had is None:
        return "the VM's directory has no domain.xml: it was defined before lab_rerun existed"
    # the description names the run that defined the VM: not the VM itself
    w, h = ([x for x in t.splitlines() if not x.strip().startswith("<description>")] for t in (want, had))
    for n in range(max(len(w), len(h))):
        a = w[n].strip() if n < len(w) else "nothing"
        b = h[n].strip() if n < len(h) else "nothing"
        if a != b:
            return f"line {n + 1} (without the description): wants {a}, defined with {b}"
    return ""


class FilterModule:
    def filters(self):
        return {
            "lab_validate_profile": lab_validate_profile,
            "lab_scenario_requires": lab_scenario_requires,
            "lab_slot_map": lab_slot_map,
            "lab_jbof_map": lab_jbof_map,
            "lab_acpi_ports": lab_acpi_ports,
            "lab_vm_variant": lab_vm_variant,
            "lab_domain_difference": lab_domain_difference,
        }

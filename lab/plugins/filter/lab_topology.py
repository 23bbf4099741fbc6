"""The lab's topology: profile validation and the slot-to-drive map.

This is the one place that decides where root ports sit on pcie.0, which
(chassis, slot) each gets and which slots hold a drive at boot. The domain
template, the actuator's callers and the scenarios all read the map this
produces; nothing else computes addresses.
"""

import os
import re

import yaml
from ansible.errors import AnsibleFilterError

# the kernel variants are lab_kernel_variant's choices in the profile's
# declaration (lab/profile.yml, which says what each is), listed only there
with open(os.path.join(os.path.dirname(__file__), "..", "..", "profile.yml"), encoding="utf-8") as _f:
    KERNEL_VARIANTS = tuple(yaml.safe_load(_f)["variables"]["lab_kernel_variant"]["choices"])
# the variants a user's path makes, and the profile field that gives it
OWN_KERNELS = {"tree": "lab_kernel_tree", "image": "lab_kernel_image"}
PLATFORMS = ("stock", "fidelity")
# ACPI firmware of the root ports: plain is QEMU's own DSDT; thunderbolt adds
# an SSDT (domains/acpi/thunderbolt-port.asl.j2) to the slots it names.
FIRMWARES = ("plain", "thunderbolt")

# pcie.0 device numbers that can hold root ports: 0x00 is the host bridge,
# 0x01 holds the lab's own virtio functions, 0x1f is the ICH9 LPC/SATA/SMBus.
PORT_DEVICES = list(range(0x02, 0x1F))
FUNCTIONS_PER_DEVICE = 8
MAX_SLOTS = len(PORT_DEVICES) * FUNCTIONS_PER_DEVICE

# The guest's own devices on 00:01.x (multifunction).
SYSTEM_DEVICE = 0x01

# JBOFs (Lightning-style enclosures): each is a PCIe switch -- one
# x3130-upstream port in a root port of its own, with xio3130-downstream
# hotplug ports below -- and JBOF j numbers its slots j*JBOF_SLOT_BASE
# (the root port: yanking it pulls the whole enclosure) and
# j*JBOF_SLOT_BASE + k for downstream port k, so that every physical slot
# number (/sys/bus/pci/slots/<n>) stays unique in the VM.
JBOF_SLOT_BASE = 1000
MAX_JBOFS = 8                # 8 * 1000 + 32 stays inside the 13-bit slot number
MAX_JBOF_SLOTS = 32          # downstream ports take devices 0..31 on the switch's bus
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


def _bool(profile, field, default):
    value = profile.get(field, default)
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
        value = value.lower() in ("true", "yes")
    if not isinstance(value, bool):
        raise AnsibleFilterError(f"profile field {field}={value!r} must be true or false")
    return value


def _int(profile, field, minimum, maximum=None):
    value = profile.get(field)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"profile field {field}={value!r} is not a whole number")
    if isinstance(value, bool) or str(value).strip() != str(number):
        raise AnsibleFilterError(f"profile field {field}={value!r} is not a whole number")
    if number < minimum:
        raise AnsibleFilterError(f"profile field {field}={number} must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise AnsibleFilterError(f"profile field {field}={number} is more than the topology "
                                 f"can address (at most {maximum})")
    return number


def lab_validate_profile(profile, known_scenarios):
    """Return the effective profile, or fail naming the field that is wrong."""
    p = dict(profile)
    vms = _int(p, "lab_vms", 1, 64)
    jbofs = _int(p, "lab_jbofs", 0, MAX_JBOFS) if "lab_jbofs" in p else 0
    jbof_slots = _int(p, "lab_jbof_slots", 1, MAX_JBOF_SLOTS) if jbofs else 0
    jbof_drives = _int(p, "lab_jbof_drives", 0) if jbofs else 0
    if jbof_drives > jbof_slots:
        raise AnsibleFilterError(f"profile field lab_jbof_drives={jbof_drives} is more than "
                                 f"lab_jbof_slots={jbof_slots}: every drive needs its own downstream port")
    # a VM may have no root-port slot of its own when its drives are all in JBOFs
    slots = _int(p, "lab_slots", 0 if jbofs else 1, MAX_SLOTS - jbofs)
    drives = _int(p, "lab_drives", 0)
    if drives > slots:
        raise AnsibleFilterError(f"profile field lab_drives={drives} is more than "
                                 f"lab_slots={slots}: every drive needs its own slot")
    iterations = _int(p, "lab_iterations", 1)
    chassis = _int(p, "lab_chassis", 0, 255)
    variant = p.get("lab_kernel_variant")
    if variant not in KERNEL_VARIANTS:
        raise AnsibleFilterError(f"profile field lab_kernel_variant={variant!r} is unknown: "
                                 f"use one of {', '.join(KERNEL_VARIANTS)}")
    variants = _variants(p.get("lab_kernel_variants"), vms) or [variant]
    variants = _own_kernel_variants(p, variants, bool(p.get("lab_kernel_variants")))
    variant = variants[0]
    if p.get("lab_kernel_quick") and "tree" not in variants:
        raise AnsibleFilterError("profile field lab_kernel_quick=true needs lab_kernel_tree: it builds that tree's "
                                 "bzImage only")
    image_release = _bzimage_release(p["lab_kernel_image"]) if "image" in variants else ""
    platform = p.get("lab_platform", "stock")
    if platform not in PLATFORMS:
        raise AnsibleFilterError(f"profile field lab_platform={platform!r} is unknown: "
                                 f"use one of {', '.join(PLATFORMS)}")
    # fidelity platform: the emulated completion timeout, at most 1 s
    timeout_us = _int({"lab_completion_timeout_us": p.get("lab_completion_timeout_us", 0)},
                      "lab_completion_timeout_us", 0)
    if timeout_us > 1000000:
        raise AnsibleFilterError(f"profile field lab_completion_timeout_us={timeout_us} is more "
                                 f"than 1000000 (1 s); the spec's default range ends at 50000")
    # what a field needs of another (lab_dpc needs lab_platform=fidelity, ...)
    # is declared in lab/profile.yml and checked by lab_profile_check
    button = _bool(p, "lab_attention_button", True)
    dpc = _bool(p, "lab_dpc", False)
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
    numbers = [_int({"lab_slot_numbers": n}, "lab_slot_numbers", 0, 8191) for n in numbers]
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
        if chassis + jbofs > 255:
            raise AnsibleFilterError(f"profile field lab_chassis={chassis} leaves no chassis number for "
                                     f"{jbofs} JBOF(s) (JBOF j is chassis lab_chassis + j, at most 255)")
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
                     "lab_pci_hole64_mib": int(p.get("lab_pci_hole64_mib", -1))},
                    numbers[:drives], firmware_slots)
    aer_errors = p.get("lab_aer_errors", [])
    if not isinstance(aer_errors, list) or not all(
            isinstance(e, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*|0x[0-9a-fA-F]{1,8}", e) for e in aer_errors):
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
    firmware = p.get("lab_firmware", "plain")
    if firmware not in FIRMWARES:
        raise AnsibleFilterError(f"profile field lab_firmware={firmware!r} is unknown: "
                                 f"use one of {', '.join(FIRMWARES)}")
    chosen = p.get("lab_firmware_slots") or []
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
    chosen = [_int({"lab_firmware_slots": n}, "lab_firmware_slots", 0, 8191) for n in chosen]
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

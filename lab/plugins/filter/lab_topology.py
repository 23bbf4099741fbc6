"""The lab's topology: profile validation and the slot-to-drive map.

This is the one place that decides where root ports sit on pcie.0, which
(chassis, slot) each gets and which slots hold a drive at boot. The domain
template, the actuator's callers and the scenarios all read the map this
produces; nothing else computes addresses.
"""

from ansible.errors import AnsibleFilterError

KERNEL_VARIANTS = ("patched", "stock", "distro")
PLATFORMS = ("stock",)

# pcie.0 device numbers that can hold root ports: 0x00 is the host bridge,
# 0x01 holds the lab's own virtio functions, 0x1f is the ICH9 LPC/SATA/SMBus.
PORT_DEVICES = list(range(0x02, 0x1F))
FUNCTIONS_PER_DEVICE = 8
MAX_SLOTS = len(PORT_DEVICES) * FUNCTIONS_PER_DEVICE

# The guest's own devices on 00:01.x (multifunction).
SYSTEM_DEVICE = 0x01


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
    slots = _int(p, "lab_slots", 1, MAX_SLOTS)
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
    platform = p.get("lab_platform", "stock")
    if platform not in PLATFORMS:
        raise AnsibleFilterError(f"profile field lab_platform={platform!r} is unknown: "
                                 f"use one of {', '.join(PLATFORMS)}")
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
    p.update(lab_vms=vms, lab_slots=slots, lab_drives=drives, lab_iterations=iterations,
             lab_chassis=chassis, lab_kernel_variant=variant, lab_platform=platform,
             lab_scenarios=scenarios, lab_slot_numbers=numbers)
    return p


def _port_address(index):
    """pcie.0 address of the index-th root port (0-based).

    The first 29 ports take function 0 of devices 0x02..0x1e; further
    ports fill functions 1..7 of the same devices in order.
    """
    if index < len(PORT_DEVICES):
        return PORT_DEVICES[index], 0
    rest = index - len(PORT_DEVICES)
    return PORT_DEVICES[rest // (FUNCTIONS_PER_DEVICE - 1)], 1 + rest % (FUNCTIONS_PER_DEVICE - 1)


def lab_slot_map(profile, vm_index):
    """The slot-to-drive map of one VM: a list with one entry a root port."""
    slots = profile["lab_slots"]
    addresses = [_port_address(i) for i in range(slots)]
    multi = {dev for dev, fn in addresses if fn > 0}
    result = []
    for i, (dev, fn) in enumerate(addresses):
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
            "drive": None,
        }
        if i < profile["lab_drives"]:
            entry["drive"] = {
                "id": f"nvme-s{number}",
                "node": f"drive-s{number}",
                "serial": f"lab{vm_index}-s{number}-g0",  # NVMe allows 20 chars
                "file": f"drive-s{number}.raw",
            }
        result.append(entry)
    return result


class FilterModule:
    def filters(self):
        return {
            "lab_validate_profile": lab_validate_profile,
            "lab_slot_map": lab_slot_map,
        }

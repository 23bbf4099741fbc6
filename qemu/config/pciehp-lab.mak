# Devices of the lab's QEMU (configure --without-default-devices
# --with-devices-x86_64=pciehp-lab): the q35 machine and what
# domains/lab-vm.xml.j2 puts on it, and switch ports for JBOF topologies.
# Anything else is left out to keep a cold build short.
CONFIG_Q35=y
CONFIG_PCIE_PORT=y
CONFIG_XIO3130=y
CONFIG_NVME_PCI=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_BLK=y
CONFIG_VIRTIO_SERIAL=y
CONFIG_ISA_DEBUG=y
# What Debian's q35 has besides (devices the machine only implies, which
# --without-default-devices leaves out; compared with info qtree): without
# the HPET a guest's timer stops after an S3 resume (sleep-replacement hung
# after "Waking up from system sleep state S3"), and the machine should be
# the one the stock platform measures.
CONFIG_HPET=y
CONFIG_VMPORT=y
CONFIG_VMMOUSE=y

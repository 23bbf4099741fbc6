/* Unit tests: config addresses, slot registers, HMP text, serials. */
#include "hpslot.h"
#include "test_hpslot.h"

#include <stdlib.h>

static void test_absent_pcs(void);

void test_regs(void)
{
	test_absent_pcs();
	/* 0xCF8 config address: 0x80000000 | bus<<16 | dev<<11 | fn<<8 | reg&0xfc */
	CHECK_EQ(hp_cf8_address(0, 3, 0, 0x6c), 0x8000186c);
	CHECK_EQ(hp_cf8_address(0, 2, 0, 0x6c), 0x8000106c);
	CHECK_EQ(hp_cf8_address(0, 2, 0, 0x6e), 0x8000106c);	/* SLTSTA: same dword */
	CHECK_EQ(hp_cf8_address(0, 0x1e, 7, 0x6c), 0x8000f76c);
	CHECK_EQ(hp_cf8_address(5, 0x1f, 7, 0xff), 0x8005fffc);
	CHECK_EQ(hp_cf8_address(0, 0, 0, 0), 0x80000000);
	CHECK_EQ(hp_cf8_address(0, 0x20, 8, 0x100), 0x80000000);	/* out-of-range bits masked */
	/* data port: 0xcfc + (reg & 3) */
	CHECK_EQ(hp_cfc_port(0x6c), 0xcfc);
	CHECK_EQ(hp_cfc_port(0x6e), 0xcfe);
	CHECK_EQ(hp_cfc_port(0x6d), 0xcfd);
	/* ECAM offsets */
	CHECK_EQ(hp_ecam_offset(0, 2, 0, 0), 0x10000);
	CHECK_EQ(hp_ecam_offset(0, 6, 0, 0x6c), 0x3006c);
	CHECK_EQ(hp_ecam_offset(0, 2, 1, 0), 0x11000);
	CHECK_EQ(hp_ecam_offset(1, 0, 0, 0), 0x100000);
	CHECK_EQ(hp_ecam_offset(0, 0x1e, 7, 0xfff), 0xf7fff);

	/* the yank: power controller off + power indicator off, old bits kept */
	CHECK_EQ(hp_yank_value(0x01f1), 0x07f1);
	CHECK_EQ(hp_yank_value(0x02f1), 0x07f1);
	CHECK_EQ(hp_yank_value(0x0000), 0x0700);
	CHECK_EQ(hp_yank_value(0x17f1), 0x17f1);
	CHECK_EQ(hp_sltctl_with_pic(0x02f1, SLTCTL_IND_ON), 0x01f1);
	CHECK_EQ(hp_sltctl_with_pic(0x01f1, SLTCTL_IND_BLINK), 0x02f1);
	CHECK_EQ(hp_sltctl_with_pic(0x07f1, SLTCTL_IND_ON), 0x05f1);

	/* decoding */
	CHECK_EQ(hp_pic(0x01f1), SLTCTL_IND_ON);
	CHECK_EQ(hp_pic(0x02f1), SLTCTL_IND_BLINK);
	CHECK_EQ(hp_pic(0x07f1), SLTCTL_IND_OFF);
	CHECK_EQ(hp_aic(0x01f1), SLTCTL_IND_OFF);
	CHECK_EQ(hp_aic(0x0171), SLTCTL_IND_ON);
	CHECK_STR(hp_indicator_name(hp_pic(0x02f1)), "blink");
	CHECK_STR(hp_indicator_name(0), "reserved");
	CHECK(hp_power_on(0x01f1));
	CHECK(!hp_power_on(0x05f1));

	/* readiness of an empty slot for hot-add */
	CHECK(hp_empty_slot_busy(0x07f1, 0x0000) == NULL);	/* powered off, indicator off: ready */
	CHECK(hp_empty_slot_busy(0x07f1, 0x0008) == NULL);	/* a stale PDC does not matter */
	CHECK(hp_empty_slot_busy(0x01f1, 0x0008) != NULL);	/* just yanked: still powered on */
	CHECK(hp_empty_slot_busy(0x05f1, 0x0000) != NULL);	/* powered off, indicator still on */
	CHECK(hp_empty_slot_busy(0x06f1, 0x0000) != NULL);	/* blinking */
	CHECK(hp_empty_slot_busy(0x07f1, 0x0040) != NULL);	/* presence detected */

	char fl[64];
	hp_sltsta_flags(0x0148, fl, sizeof(fl));
	CHECK_STR(fl, "PDC PDS DLLSC");
	hp_sltsta_flags(0, fl, sizeof(fl));
	CHECK_STR(fl, "");
	hp_sltsta_flags(0x01ff, fl, 8);	/* truncates, stays terminated */
	CHECK(strlen(fl) < 8);

	/* capability walk on a copy of QEMU's pcie-root-port config space */
	uint8_t cfg[256];
	memset(cfg, 0, sizeof(cfg));
	cfg[0] = 0x36; cfg[1] = 0x1b; cfg[2] = 0x0c; cfg[3] = 0x00;
	cfg[PCI_STATUS] = PCI_STATUS_CAP_LIST;
	cfg[PCI_CAPABILITY_LIST] = 0x40;
	cfg[0x40] = 0x0d; cfg[0x41] = 0x48;	/* bridge subsystem vendor */
	cfg[0x48] = 0x11; cfg[0x49] = 0x54;	/* MSI-X */
	cfg[0x54] = PCI_CAP_ID_EXP; cfg[0x55] = 0x00;
	CHECK_EQ(hp_find_cap(cfg, PCI_CAP_ID_EXP), 0x54);
	CHECK_EQ(hp_find_cap(cfg, 0x11), 0x48);
	CHECK_EQ(hp_find_cap(cfg, 0x05), 0);		/* no MSI */
	cfg[0x55] = 0x40;				/* a loop */
	CHECK_EQ(hp_find_cap(cfg, 0x05), 0);
	cfg[0x55] = 0x00;
	cfg[0x49] = 0x56;				/* low bits of pointers are ignored */
	CHECK_EQ(hp_find_cap(cfg, PCI_CAP_ID_EXP), 0x54);
	cfg[PCI_STATUS] = 0;				/* no capability list */
	CHECK_EQ(hp_find_cap(cfg, PCI_CAP_ID_EXP), 0);
	memset(cfg, 0xff, sizeof(cfg));			/* a vanished device */
	CHECK_EQ(hp_find_cap(cfg, PCI_CAP_ID_EXP), 0);
	/* the register offsets the notes give for QEMU's root port */
	CHECK_EQ(0x54 + EXP_LNKSTA, 0x66);
	CHECK_EQ(0x54 + EXP_SLTCAP, 0x68);
	CHECK_EQ(0x54 + EXP_SLTCTL, 0x6c);
	CHECK_EQ(0x54 + EXP_SLTSTA, 0x6e);
	CHECK_EQ(SLTCAP_PSN(0x00580060u), 11);
}

static void test_absent_pcs(void)
{
	struct hp_absent_pc pc[HP_ABSENT_PCS_MAX];

	CHECK_EQ(hp_parse_absent_pcs("", pc, HP_ABSENT_PCS_MAX), 0);
	CHECK_EQ(hp_parse_absent_pcs("0xffffffff8152a1b4:4", pc, HP_ABSENT_PCS_MAX), 1);
	CHECK_STR(pc[0].pc, "0xffffffff8152a1b4");
	CHECK_EQ(pc[0].count, 4);
	CHECK_EQ(hp_parse_absent_pcs("0xff024:3,0x0:2,other:9", pc, HP_ABSENT_PCS_MAX), 3);
	CHECK_STR(pc[0].pc, "0xff024");
	CHECK_STR(pc[1].pc, "0x0");
	CHECK_EQ(pc[1].count, 2);
	CHECK_STR(pc[2].pc, "other");
	CHECK_EQ(pc[2].count, 9);
	CHECK_EQ(hp_parse_absent_pcs("0x1:9223372036854775807", pc, HP_ABSENT_PCS_MAX), 1);
	CHECK_EQ(pc[0].count, 9223372036854775807LL);
	/* not QEMU's format */
	CHECK_EQ(hp_parse_absent_pcs(NULL, pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1:", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs(":3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x:3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0xFF:3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x0ff:3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("ff:3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1:3,", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1:-3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1:3x", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1:99999999999999999999", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x12345678901234567:1", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("other:1,0x1:3", pc, HP_ABSENT_PCS_MAX), -1);
	CHECK_EQ(hp_parse_absent_pcs("0x1:1,0x2:1,0x3:1", pc, 2), -1);
}

void test_text(void)
{
	uint32_t w[64], v;

	/* HMP xp as QEMU 7.2 prints it */
	const char *xp = "00000000b0010000: 0x000c1b36 0x00100506 0x06040000 0x00010000\r\n"
			 "00000000b0010010: 0x00000000 0x00000000 0x00010100 0x000000f0\r\n";
	CHECK_EQ(hp_parse_xp_words(xp, 0xb0010000ull, w, 64), 8);
	CHECK_EQ(w[0], 0x000c1b36);
	CHECK_EQ(w[6], 0x00010100);
	CHECK_EQ(hp_parse_xp_words(xp, 0xb0010000ull, w, 3), 3);
	CHECK_EQ(hp_parse_xp_words(xp, 0xb0000000ull, w, 64), -1);	/* wrong address */
	CHECK_EQ(hp_parse_xp_words("00000000bfffffff: Cannot access memory\r\n", 0xbfffffffull, w, 1), -1);
	CHECK_EQ(hp_parse_xp_words("invalid char in format: 'l'\r\n", 0xb0000000ull, w, 1), -1);
	CHECK_EQ(hp_parse_xp_words("00000000b001006c: 0x004001f1\n", 0xb001006cull, w, 1), 1);
	CHECK_EQ(w[0], 0x004001f1);
	CHECK_EQ(hp_parse_xp_words("00000000b0010000: 0x00000001 0x00000002\n"
				   "00000000b0010010: 0x00000003\n", 0xb0010000ull, w, 64), -1);	/* gap */

	/* HMP i */
	CHECK_EQ(hp_parse_ioport_read("portl[0x0cf8] = 0x80000898\r\n", &v), 0);
	CHECK_EQ(v, 0x80000898);
	CHECK_EQ(hp_parse_ioport_read("portw[0x0cfe] = 0x0040\r\n", &v), 0);
	CHECK_EQ(v, 0x40);
	CHECK_EQ(hp_parse_ioport_read("invalid char in format: 'l'\r\n", &v), -1);
	CHECK_EQ(hp_parse_ioport_read("", &v), -1);
	CHECK(hp_hmp_is_error("invalid char in format: 'l'\r\nTry \"help i\" for more information\r\n"));
	CHECK(hp_hmp_is_error("unknown command: 'foo'\r\n"));
	CHECK(!hp_hmp_is_error("portl[0x0cf8] = 0x80000898\r\n"));

	/* info mtree: first enabled pcie-mmcfg-mmio */
	const char *mtree =
		"address-space: memory\n"
		"  0000000000000000-ffffffffffffffff (prio 0, i/o): system\n"
		"    00000000e0000000-00000000efffffff (prio 0, i/o): pcie-mmcfg-mmio [disabled]\n"
		"    00000000b0000000-00000000bfffffff (prio 0, i/o): pcie-mmcfg-mmio\n"
		"    00000000fed1c000-00000000fed1ffff (prio 1, i/o): lpc-rcrb-mmio\n";
	uint64_t base = 0, size = 0;
	CHECK_EQ(hp_parse_mtree_mmcfg(mtree, &base, &size), 0);
	CHECK_EQ(base, 0xb0000000ull);
	CHECK_EQ(size, 0x10000000ull);
	CHECK_EQ(hp_parse_mtree_mmcfg("address-space: memory\n  0-f (prio 0, i/o): system\n", &base, &size), -1);
	CHECK_EQ(hp_parse_mtree_mmcfg("    00000000b0000000-00000000bfffffff (prio 0, i/o): "
				      "pcie-mmcfg-mmio [disabled]\n", &base, &size), -1);
}

void test_serials(void)
{
	char s[64];

	CHECK_EQ(hp_serial_bump("lab1-s3-g0", s, sizeof(s)), 0);
	CHECK_STR(s, "lab1-s3-g1");
	CHECK_EQ(hp_serial_bump("lab1-s3-g9", s, sizeof(s)), 0);
	CHECK_STR(s, "lab1-s3-g10");
	CHECK_EQ(hp_serial_bump("lab12-s120-g41", s, sizeof(s)), 0);
	CHECK_STR(s, "lab12-s120-g42");
	CHECK_EQ(hp_serial_bump("plain", s, sizeof(s)), 0);
	CHECK_STR(s, "plain-g1");
	CHECK_EQ(hp_serial_bump("a-gx", s, sizeof(s)), 0);
	CHECK_STR(s, "a-gx-g1");
	CHECK_EQ(hp_serial_bump("a-g1-g2", s, sizeof(s)), 0);
	CHECK_STR(s, "a-g1-g3");
	CHECK_EQ(hp_serial_bump("lab99-s8191-g999999", s, sizeof(s)), 0);
	CHECK_STR(s, "lab99-s8191-g1000000");				/* 20 chars: the limit */
	CHECK_EQ(hp_serial_bump("lab999-s8191-g999999", s, sizeof(s)), -1);	/* would be 21 */
	CHECK_EQ(hp_serial_bump("lab1-s3-g0", s, 5), -1);			/* buffer too small */
	CHECK(hp_valid_serial("lab1-s3-g0"));
	CHECK(hp_valid_serial("12345678901234567890"));
	CHECK(!hp_valid_serial("123456789012345678901"));
	CHECK(!hp_valid_serial(""));
	CHECK(!hp_valid_serial("a b"));
	CHECK(!hp_valid_serial("a,b"));
	CHECK(!hp_valid_serial("a\"b"));

	/* live metadata records */
	char xml[1024], x2[1024];
	CHECK_EQ(hp_metadata_set(NULL, 3, "lab1-s3-g1", xml, sizeof(xml)), 0);
	CHECK_STR(xml, "<serials><slot n=\"3\" serial=\"lab1-s3-g1\"/></serials>");
	CHECK_EQ(hp_metadata_set(xml, 12, "lab1-s12-g0", x2, sizeof(x2)), 0);
	CHECK_EQ(hp_metadata_set(x2, 3, "lab1-s3-g2", xml, sizeof(xml)), 0);
	CHECK_STR(xml, "<serials><slot n=\"3\" serial=\"lab1-s3-g2\"/><slot n=\"12\" serial=\"lab1-s12-g0\"/></serials>");
	CHECK_EQ(hp_metadata_serial(xml, 3, s, sizeof(s)), 0);
	CHECK_STR(s, "lab1-s3-g2");
	CHECK_EQ(hp_metadata_serial(xml, 12, s, sizeof(s)), 0);
	CHECK_STR(s, "lab1-s12-g0");
	CHECK_EQ(hp_metadata_serial(xml, 1, s, sizeof(s)), -1);
	CHECK_EQ(hp_metadata_serial(NULL, 1, s, sizeof(s)), -1);
	/* as libvirt may return it: pretty-printed, other quotes, a prefix */
	CHECK_EQ(hp_metadata_serial("<hpslot:serials xmlns:hpslot=\"x\">\n  <hpslot:slot n='7' serial='x-s7-g4'/>\n"
				    "  <slot n=\"8\" serial=\"y\"/>\n</hpslot:serials>", 8, s, sizeof(s)), 0);
	CHECK_STR(s, "y");
	CHECK_EQ(hp_metadata_serial("<serials>\n  <slot n=\"7\" serial=\"x-s7-g4\"/>\n</serials>\n", 7, s, sizeof(s)), 0);
	CHECK_STR(s, "x-s7-g4");
	CHECK_EQ(hp_metadata_set(NULL, 3, "bad serial", xml, sizeof(xml)), -1);
	CHECK_EQ(hp_metadata_set(NULL, 3, "ok", xml, 10), -1);			/* too small */

	/* cold-plugged drives in the domain XML, as libvirt prints them */
	const char *dom =
		"<domain>\n<qemu:commandline>\n"
		"    <qemu:arg value=\"-device\"/>\n"
		"    <qemu:arg value=\"{&quot;driver&quot;:&quot;nvme&quot;,&quot;id&quot;:&quot;nvme-s3&quot;,"
		"&quot;serial&quot;:&quot;lab1-s3-g0&quot;,&quot;drive&quot;:&quot;drive-s3&quot;,"
		"&quot;bus&quot;:&quot;pci.3&quot;}\"/>\n"
		"    <qemu:arg value='nvme,id=nvme-s4,serial=lab1-s4-g0,drive=drive-s4,bus=pci.4'/>\n"
		"    <qemu:arg value=\"driver=nvme,id=nvme-s5,serial=kv5,drive=drive-s5,bus=pci.5\"/>\n"
		"</qemu:commandline>\n</domain>\n";
	CHECK_EQ(hp_xml_boot_serial(dom, "nvme-s3", s, sizeof(s)), 0);
	CHECK_STR(s, "lab1-s3-g0");
	CHECK_EQ(hp_xml_boot_serial(dom, "nvme-s4", s, sizeof(s)), 0);
	CHECK_STR(s, "lab1-s4-g0");
	CHECK_EQ(hp_xml_boot_serial(dom, "nvme-s5", s, sizeof(s)), 0);
	CHECK_STR(s, "kv5");
	CHECK_EQ(hp_xml_boot_serial(dom, "nvme-s1", s, sizeof(s)), -1);
	CHECK_EQ(hp_xml_boot_serial(NULL, "nvme-s1", s, sizeof(s)), -1);
	CHECK_EQ(hp_xml_serial_prefix(dom, s, sizeof(s)), 0);
	CHECK_STR(s, "lab1");
	CHECK_EQ(hp_xml_serial_prefix("<domain/>", s, sizeof(s)), -1);
}

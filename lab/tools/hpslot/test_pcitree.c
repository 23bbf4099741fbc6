/* Unit tests of the query-pci flattening (pcitree.c): ports below a
 * switch get the bus number the guest gave the switch's internal bus and
 * know their root port. */
#include "hpslot.h"
#include "test_hpslot.h"

#include <stdlib.h>

/* A JBOF as QEMU 7.2 reports it once the guest numbered the buses: root
 * port pci.3 (00:04.0, buses 3-6) holds upstream port pci.4 (03:00.0)
 * whose internal bus 4 holds downstream ports pci.5 (04:00.0, bus 5, an
 * NVMe in it) and pci.6 (04:01.0, bus 6, empty); root port pci.1 holds
 * a drive; root port pci.2's bus is not numbered yet (nothing nested). */
static const char *fixture =
	"[{\"bus\": 0, \"devices\": ["
	"{\"bus\": 0, \"slot\": 0, \"function\": 0, \"id\": {\"vendor\": 32902, \"device\": 10688},"
	" \"qdev_id\": \"\", \"regions\": []},"
	"{\"bus\": 0, \"slot\": 2, \"function\": 0, \"id\": {\"vendor\": 6966, \"device\": 12},"
	" \"qdev_id\": \"pci.1\", \"pci_bridge\": {\"bus\": {\"number\": 1, \"secondary\": 1, \"subordinate\": 1},"
	"  \"devices\": [{\"bus\": 1, \"slot\": 0, \"function\": 0, \"id\": {\"vendor\": 6966, \"device\": 16},"
	"   \"qdev_id\": \"nvme-s1\", \"regions\": []}]}},"
	"{\"bus\": 0, \"slot\": 3, \"function\": 0, \"qdev_id\": \"pci.2\","
	" \"pci_bridge\": {\"bus\": {\"number\": 0, \"secondary\": 0, \"subordinate\": 0}, \"devices\": []}},"
	"{\"bus\": 0, \"slot\": 4, \"function\": 0, \"qdev_id\": \"pci.3\","
	" \"pci_bridge\": {\"bus\": {\"number\": 3, \"secondary\": 3, \"subordinate\": 6}, \"devices\": ["
	"  {\"bus\": 3, \"slot\": 0, \"function\": 0, \"qdev_id\": \"pci.4\","
	"   \"pci_bridge\": {\"bus\": {\"number\": 4, \"secondary\": 4, \"subordinate\": 6}, \"devices\": ["
	"    {\"bus\": 4, \"slot\": 0, \"function\": 0, \"qdev_id\": \"pci.5\","
	"     \"pci_bridge\": {\"bus\": {\"number\": 5, \"secondary\": 5, \"subordinate\": 5}, \"devices\": ["
	"      {\"bus\": 5, \"slot\": 0, \"function\": 0, \"qdev_id\": \"nvme-s1001\"}]}},"
	"    {\"bus\": 4, \"slot\": 1, \"function\": 0, \"qdev_id\": \"pci.6\","
	"     \"pci_bridge\": {\"bus\": {\"number\": 6, \"secondary\": 6, \"subordinate\": 6}, \"devices\": []}}"
	"   ]}}]}}"
	"]}]";

void test_pcitree(void)
{
	struct json_object *q = json_tokener_parse(fixture);
	struct hp_pcidev d[32];
	char b[16];

	CHECK(q != NULL);
	int n = hp_pci_flatten(q, d, 32);
	CHECK_EQ(n, 9);
	int hb = hp_pci_find(d, n, "");
	CHECK_EQ(hb, -1);	/* anonymous functions are not found by an empty id */
	CHECK_EQ(d[0].ids, 32902 | 10688u << 16);

	int rp = hp_pci_find(d, n, "pci.1"), nv = hp_pci_find(d, n, "nvme-s1");
	CHECK(rp >= 0 && nv >= 0);
	CHECK_EQ(d[rp].bus, 0);
	CHECK_EQ(d[rp].dev, 2);
	CHECK_EQ(d[rp].secondary, 1);
	CHECK_EQ(d[nv].bus, 1);
	CHECK_EQ(d[nv].parent, rp);
	CHECK_EQ(hp_pci_root(d, n, nv), rp);
	CHECK_EQ(hp_pci_root(d, n, rp), rp);

	int un = hp_pci_find(d, n, "pci.2");
	CHECK_EQ(d[un].secondary, 0);	/* not numbered: nothing nested below */

	int jr = hp_pci_find(d, n, "pci.3"), up = hp_pci_find(d, n, "pci.4");
	int dp1 = hp_pci_find(d, n, "pci.5"), dp2 = hp_pci_find(d, n, "pci.6");
	int jd = hp_pci_find(d, n, "nvme-s1001");
	CHECK(jr >= 0 && up >= 0 && dp1 >= 0 && dp2 >= 0 && jd >= 0);
	CHECK_EQ(d[jr].subordinate, 6);
	CHECK_EQ(d[up].bus, 3);
	CHECK_EQ(d[up].parent, jr);
	CHECK_EQ(d[dp1].bus, 4);
	CHECK_EQ(d[dp1].dev, 0);
	CHECK_EQ(d[dp2].bus, 4);
	CHECK_EQ(d[dp2].dev, 1);
	CHECK_EQ(d[dp2].secondary, 6);
	CHECK_EQ(d[dp1].parent, up);
	CHECK_EQ(d[jd].bus, 5);
	CHECK_EQ(hp_pci_root(d, n, dp2), jr);
	CHECK_EQ(hp_pci_root(d, n, jd), jr);
	CHECK_EQ(hp_pci_root(d, n, 99), -1);

	/* config address of the downstream port's Slot Control (type-1, bus 4) */
	CHECK_EQ(hp_cf8_address(d[dp2].bus, d[dp2].dev, d[dp2].fn, 0x6c), 0x80040800u | 0x6c);
	hp_bdf(d[dp2].bus, d[dp2].dev, d[dp2].fn, b, sizeof(b));
	CHECK_STR(b, "04:01.0");

	/* too small an array, and answers that are not query-pci */
	CHECK_EQ(hp_pci_flatten(q, d, 4), -1);
	CHECK_EQ(hp_pci_flatten(NULL, d, 32), -1);
	struct json_object *o = json_tokener_parse("{\"return\": []}");
	CHECK_EQ(hp_pci_flatten(o, d, 32), -1);
	json_object_put(o);
	o = json_tokener_parse("[]");
	CHECK_EQ(hp_pci_flatten(o, d, 32), 0);
	json_object_put(o);
	json_object_put(q);
}

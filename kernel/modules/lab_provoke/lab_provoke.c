// SPDX-License-Identifier: GPL-2.0
/*
 * lab_provoke: provokes one report of each kind the lab's kernel-log gate
 * must catch on the debug kernel (kernel/config/debug.config), so that a
 * test can show each pattern fail the scenario it happens in:
 *
 *   echo "lockdep TOKEN"         > /sys/kernel/debug/lab_provoke/provoke
 *   echo "kasan TOKEN"           > /sys/kernel/debug/lab_provoke/provoke
 *   echo "sleep-in-atomic TOKEN" > /sys/kernel/debug/lab_provoke/provoke
 *
 * lockdep: two mutexes taken in both orders by one task ("possible
 * circular locking dependency detected"; no deadlock, one task). Lockdep
 * turns itself off after its first report, for the rest of the boot.
 * kasan: a one-byte read just past a 16-byte kmalloc ("BUG: KASAN:
 * slab-out-of-bounds"); the read is harmless without KASAN too (the slab
 * object is larger than 16 bytes).
 * sleep-in-atomic: might_sleep() with preemption disabled ("BUG: sleeping
 * function called from invalid context"); nothing sleeps.
 *
 * Only for guests of the lab: never load it into a kernel you care about.
 */
#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

static DEFINE_MUTEX(lab_provoke_a);
static DEFINE_MUTEX(lab_provoke_b);
static struct dentry *lab_provoke_dir;

static void provoke_lockdep(void)
{
	mutex_lock(&lab_provoke_a);
	mutex_lock(&lab_provoke_b);
	mutex_unlock(&lab_provoke_b);
	mutex_unlock(&lab_provoke_a);

	mutex_lock(&lab_provoke_b);
	mutex_lock(&lab_provoke_a);
	mutex_unlock(&lab_provoke_a);
	mutex_unlock(&lab_provoke_b);
}

static void provoke_kasan(void)
{
	size_t size = 16;
	char *p = kmalloc(size, GFP_KERNEL);

	if (!p)
		return;
	/* keep the compiler from proving the index out of bounds */
	OPTIMIZER_HIDE_VAR(size);
	pr_info("lab_provoke: read past the object: %d\n", READ_ONCE(p[size]));
	kfree(p);
}

static void provoke_sleep_in_atomic(void)
{
	preempt_disable();
	might_sleep();
	preempt_enable();
}

static const struct {
	const char *kind;
	void (*provoke)(void);
} lab_provoke_kinds[] = {
	{ "lockdep", provoke_lockdep },
	{ "kasan", provoke_kasan },
	{ "sleep-in-atomic", provoke_sleep_in_atomic },
};

static ssize_t lab_provoke_write(struct file *file, const char __user *ubuf,
				 size_t count, loff_t *ppos)
{
	char buf[128], *token, *kind;
	size_t i;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	token = strim(buf);
	kind = strsep(&token, " ");
	for (i = 0; i < ARRAY_SIZE(lab_provoke_kinds); i++) {
		if (strcmp(kind, lab_provoke_kinds[i].kind))
			continue;
		pr_info("lab_provoke: provoking %s for %s\n", kind,
			token ? token : "-");
		lab_provoke_kinds[i].provoke();
		return count;
	}
	return -EINVAL;
}

static const struct file_operations lab_provoke_fops = {
	.owner = THIS_MODULE,
	.write = lab_provoke_write,
	.llseek = noop_llseek,
};

static int __init lab_provoke_init(void)
{
	lab_provoke_dir = debugfs_create_dir("lab_provoke", NULL);
	debugfs_create_file("provoke", 0200, lab_provoke_dir, NULL,
			    &lab_provoke_fops);
	return 0;
}

static void __exit lab_provoke_exit(void)
{
	debugfs_remove_recursive(lab_provoke_dir);
}

module_init(lab_provoke_init);
module_exit(lab_provoke_exit);
MODULE_DESCRIPTION("Provokes lockdep, KASAN and sleep-in-atomic reports for the pciehp-lab kernel-log gate");
MODULE_LICENSE("GPL");

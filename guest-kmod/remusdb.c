// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdb.ko — the guest half of RemusDB's commit protection.
 *
 *  - REMUSDB_SO_PROTECT, a socket option at SOL_IP (IPv4) and SOL_IPV6
 *    (IPv6) for TCP sockets (nf_register_sockopt): sets or clears
 *    REMUSDB_SK_MARK_BIT in the socket's mark.  REMUSDB_SO_ABORT_GEN
 *    (get only) reads the abort generation.
 *  - A POST_ROUTING hook at the last priority, in every network
 *    namespace, that marks the packets carrying that bit: the IPv4
 *    reserved flag bit, or the IPv6 DSCP `dscp` (see uapi/remusdb.h).
 *  - /dev/remusdb: the failover event.  The guest helper writes a
 *    struct remusdb_event (root only); readers block, or poll, until an
 *    event newer than the last one they read.  An event with
 *    REMUSDB_EVENT_ABORT moves the abort generation before the write
 *    returns.
 *  - /sys/kernel/remusdb/: counters and state.
 *
 * No per-socket state is kept outside the socket's own mark, so there is
 * nothing to free when a socket goes; on unload the bit is cleared from
 * every TCP socket that still has it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/kobject.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/netfilter.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include <linux/wait.h>
#include <net/checksum.h>
#include <net/dsfield.h>
#include <net/inet_hashtables.h>
#include <net/ip.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "include/uapi/remusdb.h"

static int dscp = REMUSDB_DSCP_DEFAULT;
module_param(dscp, int, 0444);
MODULE_PARM_DESC(dscp, "IPv6 DSCP codepoint that marks protected packets (0..63; default 0x2b); remusdbd must use the same");

static int protect_gid = -1;
module_param(protect_gid, int, 0444);
MODULE_PARM_DESC(protect_gid, "if >= 0, only members of this group (or CAP_NET_ADMIN) may protect sockets; -1 (default): any process, for its own sockets");

static atomic64_t packets_marked = ATOMIC64_INIT(0);
static atomic64_t protect_calls = ATOMIC64_INIT(0);
static atomic64_t unprotect_calls = ATOMIC64_INIT(0);
static atomic64_t denied = ATOMIC64_INIT(0);
/* failover events that asked the DBMS to abort: see uapi/remusdb.h */
static atomic64_t abort_gen = ATOMIC64_INIT(0);

/* ---- the socket option ---- */

static int check_sock(struct sock *sk)
{
	if (sk->sk_type != SOCK_STREAM || sk->sk_protocol != IPPROTO_TCP)
		return -EOPNOTSUPP;
	return 0;
}

static bool may_protect(void)
{
	if (protect_gid < 0 || capable(CAP_NET_ADMIN))
		return true;
	return in_group_p(make_kgid(current_user_ns(), protect_gid));
}

static int so_set(struct sock *sk, int optval, sockptr_t arg, unsigned int len)
{
	int on, rc = check_sock(sk);

	if (rc)
		return rc;
	if (optval != REMUSDB_SO_PROTECT)
		return -ENOPROTOOPT;
	if (len < sizeof(int))
		return -EINVAL;
	if (copy_from_sockptr(&on, arg, sizeof(on)))
		return -EFAULT;
	if (!may_protect()) {
		atomic64_inc(&denied);
		return -EPERM;
	}
	lock_sock(sk);
	if (on)
		sk->sk_mark |= REMUSDB_SK_MARK_BIT;
	else
		sk->sk_mark &= ~REMUSDB_SK_MARK_BIT;
	/* as SO_MARK does: a cached route may depend on the mark */
	sk_dst_reset(sk);
	release_sock(sk);
	atomic64_inc(on ? &protect_calls : &unprotect_calls);
	return 0;
}

static int so_get(struct sock *sk, int optval, void __user *user, int *len)
{
	int on, rc = check_sock(sk);

	if (rc)
		return rc;
	if (optval == REMUSDB_SO_ABORT_GEN) {
		u64 gen = atomic64_read(&abort_gen);

		if (*len < (int)sizeof(gen))
			return -EINVAL;
		if (copy_to_user(user, &gen, sizeof(gen)))
			return -EFAULT;
		*len = sizeof(gen);
		return 0;
	}
	if (optval != REMUSDB_SO_PROTECT)
		return -ENOPROTOOPT;
	if (*len < (int)sizeof(int))
		return -EINVAL;
	on = !!(READ_ONCE(sk->sk_mark) & REMUSDB_SK_MARK_BIT);
	if (copy_to_user(user, &on, sizeof(on)))
		return -EFAULT;
	*len = sizeof(int);
	return 0;
}

static struct nf_sockopt_ops sockopt4 = {
	.pf = PF_INET,
	.set_optmin = REMUSDB_SO_BASE,
	.set_optmax = REMUSDB_SO_MAX,
	.set = so_set,
	.get_optmin = REMUSDB_SO_BASE,
	.get_optmax = REMUSDB_SO_MAX,
	.get = so_get,
	.owner = THIS_MODULE,
};

static struct nf_sockopt_ops sockopt6 = {
	.pf = PF_INET6,
	.set_optmin = REMUSDB_SO_BASE,
	.set_optmax = REMUSDB_SO_MAX,
	.set = so_set,
	.get_optmin = REMUSDB_SO_BASE,
	.get_optmax = REMUSDB_SO_MAX,
	.get = so_get,
	.owner = THIS_MODULE,
};

/* ---- marking, at the end of POST_ROUTING ---- */

static unsigned int mark4(void *priv, struct sk_buff *skb,
			  const struct nf_hook_state *state)
{
	struct iphdr *iph;
	__be16 old;

	if (!(skb->mark & REMUSDB_SK_MARK_BIT))
		return NF_ACCEPT;
	if (skb_ensure_writable(skb, sizeof(struct iphdr)))
		return NF_ACCEPT;
	iph = ip_hdr(skb);
	old = iph->frag_off;
	iph->frag_off |= htons(REMUSDB_IPV4_MARK);
	csum_replace2(&iph->check, old, iph->frag_off);
	atomic64_inc(&packets_marked);
	return NF_ACCEPT;
}

static unsigned int mark6(void *priv, struct sk_buff *skb,
			  const struct nf_hook_state *state)
{
	if (!(skb->mark & REMUSDB_SK_MARK_BIT))
		return NF_ACCEPT;
	if (skb_ensure_writable(skb, sizeof(struct ipv6hdr)))
		return NF_ACCEPT;
	/* keep ECN, set DSCP */
	ipv6_change_dsfield(ipv6_hdr(skb), INET_ECN_MASK, (u8)(dscp << 2));
	atomic64_inc(&packets_marked);
	return NF_ACCEPT;
}

static const struct nf_hook_ops hooks[] = {
	{
		.hook = mark4,
		.pf = NFPROTO_IPV4,
		.hooknum = NF_INET_POST_ROUTING,
		.priority = NF_IP_PRI_LAST,
	},
	{
		.hook = mark6,
		.pf = NFPROTO_IPV6,
		.hooknum = NF_INET_POST_ROUTING,
		.priority = NF_IP6_PRI_LAST,
	},
};

static int __net_init net_init(struct net *net)
{
	return nf_register_net_hooks(net, hooks, ARRAY_SIZE(hooks));
}

static void __net_exit net_exit(struct net *net)
{
	nf_unregister_net_hooks(net, hooks, ARRAY_SIZE(hooks));
}

static struct pernet_operations pernet_ops = {
	.init = net_init,
	.exit = net_exit,
};

/*
 * Full sockets in TCP's established hash (IPv4 and IPv6 share it) with
 * the bit: counted, or (clear) unprotected — the latter at unload.
 */
static long walk_protected(bool clear)
{
	struct inet_hashinfo *h = &tcp_hashinfo;
	long n = 0;

	for (unsigned int i = 0; i <= h->ehash_mask; i++) {
		struct inet_ehash_bucket *b = &h->ehash[i];
		spinlock_t *lock = inet_ehash_lockp(h, i);
		struct hlist_nulls_node *node;
		struct sock *sk;

		if (hlist_nulls_empty(&b->chain))
			continue;
		spin_lock_bh(lock);
		sk_nulls_for_each(sk, node, &b->chain) {
			if (sk->sk_state == TCP_TIME_WAIT ||
			    sk->sk_state == TCP_NEW_SYN_RECV)
				continue;
			if (!(READ_ONCE(sk->sk_mark) & REMUSDB_SK_MARK_BIT))
				continue;
			n++;
			if (clear)
				WRITE_ONCE(sk->sk_mark,
					   sk->sk_mark & ~REMUSDB_SK_MARK_BIT);
		}
		spin_unlock_bh(lock);
	}
	return n;
}

/* ---- /dev/remusdb: the failover event ---- */

static DEFINE_SPINLOCK(ev_lock);
static DECLARE_WAIT_QUEUE_HEAD(ev_wq);
static struct remusdb_event last_ev;
static u64 ev_count;		/* events received: failovers seen */

struct reader {
	u64 seen;		/* ev_count when this reader last read */
};

static int ev_open(struct inode *inode, struct file *f)
{
	struct reader *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (!r)
		return -ENOMEM;
	/* A new reader waits for the next failover; the last one is in
	 * /sys/kernel/remusdb/last_epoch and last_generation. */
	spin_lock(&ev_lock);
	r->seen = ev_count;
	spin_unlock(&ev_lock);
	f->private_data = r;
	return stream_open(inode, f);
}

static int ev_release(struct inode *inode, struct file *f)
{
	kfree(f->private_data);
	return 0;
}

static bool ev_newer(struct reader *r)
{
	bool newer;

	spin_lock(&ev_lock);
	newer = ev_count != r->seen;
	spin_unlock(&ev_lock);
	return newer;
}

static ssize_t ev_read(struct file *f, char __user *buf, size_t len,
		       loff_t *off)
{
	struct reader *r = f->private_data;
	struct remusdb_event ev;
	int rc;

	if (len < sizeof(ev))
		return -EINVAL;
	if (!ev_newer(r)) {
		if (f->f_flags & O_NONBLOCK)
			return -EAGAIN;
		rc = wait_event_interruptible(ev_wq, ev_newer(r));
		if (rc)
			return rc;
	}
	spin_lock(&ev_lock);
	ev = last_ev;
	r->seen = ev_count;
	spin_unlock(&ev_lock);
	if (copy_to_user(buf, &ev, sizeof(ev)))
		return -EFAULT;
	return sizeof(ev);
}

static ssize_t ev_write(struct file *f, const char __user *buf, size_t len,
			loff_t *off)
{
	struct remusdb_event ev;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (len != sizeof(ev))
		return -EINVAL;
	if (copy_from_user(&ev, buf, sizeof(ev)))
		return -EFAULT;
	if ((ev.flags & ~REMUSDB_EVENT_ABORT) || ev.reserved)
		return -EINVAL;
	/* Before anyone can read the event, and before this write returns
	 * (the helper then tells the host): a transaction that checks the
	 * generation after that sees the failover. */
	if (ev.flags & REMUSDB_EVENT_ABORT)
		atomic64_inc(&abort_gen);
	spin_lock(&ev_lock);
	last_ev = ev;
	ev_count++;
	spin_unlock(&ev_lock);
	pr_info("failover: running from epoch %llu (generation %llu)%s\n",
		ev.epoch, ev.generation, ev.flags & REMUSDB_EVENT_ABORT ?
		": transactions that had not asked to commit must abort" : "");
	wake_up_interruptible_all(&ev_wq);
	return sizeof(ev);
}

static __poll_t ev_poll(struct file *f, poll_table *wait)
{
	struct reader *r = f->private_data;

	poll_wait(f, &ev_wq, wait);
	return ev_newer(r) ? EPOLLIN | EPOLLRDNORM : 0;
}

static const struct file_operations ev_fops = {
	.owner = THIS_MODULE,
	.open = ev_open,
	.release = ev_release,
	.read = ev_read,
	.write = ev_write,
	.poll = ev_poll,
	.llseek = no_llseek,
};

static struct miscdevice ev_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "remusdb",
	.fops = &ev_fops,
	.mode = 0644,
};

/* ---- /sys/kernel/remusdb ---- */

#define COUNTER_ATTR(name, expr)					\
static ssize_t name##_show(struct kobject *k, struct kobj_attribute *a,	\
			   char *buf)					\
{									\
	return sysfs_emit(buf, "%lld\n", (long long)(expr));		\
}									\
static struct kobj_attribute name##_attr = __ATTR_RO(name)

static u64 ev_field(bool epoch)
{
	u64 v;

	spin_lock(&ev_lock);
	v = epoch ? last_ev.epoch : last_ev.generation;
	spin_unlock(&ev_lock);
	return v;
}

static u64 ev_seen(void)
{
	u64 v;

	spin_lock(&ev_lock);
	v = ev_count;
	spin_unlock(&ev_lock);
	return v;
}

COUNTER_ATTR(protected_sockets, walk_protected(false));
COUNTER_ATTR(packets_marked, atomic64_read(&packets_marked));
COUNTER_ATTR(protect_calls, atomic64_read(&protect_calls));
COUNTER_ATTR(unprotect_calls, atomic64_read(&unprotect_calls));
COUNTER_ATTR(denied, atomic64_read(&denied));
COUNTER_ATTR(failovers_seen, ev_seen());
COUNTER_ATTR(last_epoch, ev_field(true));
COUNTER_ATTR(last_generation, ev_field(false));
COUNTER_ATTR(abort_generation, atomic64_read(&abort_gen));

static ssize_t state_show(struct kobject *k, struct kobj_attribute *a,
			  char *buf)
{
	return sysfs_emit(buf, "%s\n", walk_protected(false) ? "protecting" : "idle");
}
static struct kobj_attribute state_attr = __ATTR_RO(state);

static struct attribute *attrs[] = {
	&protected_sockets_attr.attr,
	&packets_marked_attr.attr,
	&protect_calls_attr.attr,
	&unprotect_calls_attr.attr,
	&denied_attr.attr,
	&failovers_seen_attr.attr,
	&last_epoch_attr.attr,
	&last_generation_attr.attr,
	&abort_generation_attr.attr,
	&state_attr.attr,
	NULL,
};

static const struct attribute_group attr_group = {
	.attrs = attrs,
};

static struct kobject *kobj;

/* ---- load / unload ---- */

static int __init remusdb_init(void)
{
	int rc;

	if (dscp < 0 || dscp > 63) {
		pr_err("dscp=%d: want 0..63\n", dscp);
		return -EINVAL;
	}
	kobj = kobject_create_and_add("remusdb", kernel_kobj);
	if (!kobj)
		return -ENOMEM;
	rc = sysfs_create_group(kobj, &attr_group);
	if (rc)
		goto out_kobj;
	rc = misc_register(&ev_dev);
	if (rc)
		goto out_kobj;
	rc = register_pernet_subsys(&pernet_ops);
	if (rc)
		goto out_misc;
	rc = nf_register_sockopt(&sockopt4);
	if (rc)
		goto out_pernet;
	rc = nf_register_sockopt(&sockopt6);
	if (rc)
		goto out_sockopt4;
	pr_info("loaded: option %d at SOL_IP/SOL_IPV6, IPv6 DSCP 0x%x, protect_gid %d\n",
		REMUSDB_SO_PROTECT, dscp, protect_gid);
	return 0;

out_sockopt4:
	nf_unregister_sockopt(&sockopt4);
out_pernet:
	unregister_pernet_subsys(&pernet_ops);
out_misc:
	misc_deregister(&ev_dev);
out_kobj:
	kobject_put(kobj);
	return rc;
}

static void __exit remusdb_exit(void)
{
	long n;

	nf_unregister_sockopt(&sockopt6);
	nf_unregister_sockopt(&sockopt4);
	unregister_pernet_subsys(&pernet_ops);
	n = walk_protected(true);
	misc_deregister(&ev_dev);
	kobject_put(kobj);
	pr_info("unloaded (%ld sockets still protected were unprotected)\n", n);
}

module_init(remusdb_init);
module_exit(remusdb_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("RemusDB commit protection: protected-socket option, packet marking, failover event");
MODULE_AUTHOR("RemusDB");

// SPDX-License-Identifier: GPL-2.0
/*
 * trigger6_drm: a DRM/KMS driver for the MCT Trigger 6 USB display function of a j5create
 * JCD543 dock (USB 0711:5601), written for Calametra's disposable Linux 6.1 guest from the
 * protocol notes in refdata/mct-trigger6.md and the JCD543 capture decodes.
 *
 * What lives here: one simple display pipe per output (two: HDMI and the second head), a
 * shadow-buffered primary plane over shmem GEM buffers, connector status from QUERY_MONITOR_
 * CONNECTION_STATUS (0x87), modes from the monitor's EDID (GET_EDID, 0x80) kept only when the
 * dock's firmware timing table (0x84/0x89) has the same timing, a modeset through 0x12
 * (the table record), 0x31 (software ready), 0x03 (output on), the identity LUT (0x1d) and the
 * finalise request (0x1c wValue 2) in the capture's order, and a full-frame upload on any
 * damage: a VIDEO_FLIP_HEADER and the packed planes as one DMA payload, sent as 32-byte
 * T6BULKDMAHDR packets each followed by a data packet of up to 0x19000 bytes. The flip's fence
 * comes back on the interrupt endpoint (event 0x04), which completes the page-flip event;
 * hotplug events (0x01, 0x02) re-probe the connectors.
 *
 * Errors are logged with what failed and what the driver does next: a failed modeset is
 * retried once, a stalled bulk OUT has its halt cleared (CLEAR_FEATURE(ENDPOINT_HALT)), a
 * failed or short upload cancels the dock's DMA receiver (0x14) and is sent once more, a fence
 * that does not come back in time completes the flip anyway. Nothing here waits without a
 * timeout. This module is meant to be loaded only inside the disposable guest.
 */

#include <linux/module.h>
#include <linux/usb.h>
#include <linux/workqueue.h>
#include <asm/unaligned.h>

#include <drm/drm_atomic_helper.h>
#include <drm/drm_damage_helper.h>
#include <drm/drm_drv.h>
#include <drm/drm_edid.h>
#include <drm/drm_fourcc.h>
#include <drm/drm_framebuffer.h>
#include <drm/drm_gem_atomic_helper.h>
#include <drm/drm_gem_framebuffer_helper.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_managed.h>
#include <drm/drm_modeset_helper_vtables.h>
#include <drm/drm_probe_helper.h>
#include <drm/drm_simple_kms_helper.h>
#include <drm/drm_vblank.h>

#define T6_OUTPUTS 2
#define T6_RECORD_LEN 32
#define T6_MAX_RECORDS 64
#define T6_DMA_HEADER_LEN 32
#define T6_VIDEO_HEADER_LEN 48
#define T6_CHUNK 0x19000 /* the Windows driver's fragment size */
#define T6_INTR_LEN 64
/*
 * Timeouts are generous: under QEMU's -icount sleep=off an idle guest's clock jumps to its next
 * timer while it waits for the host, so guest time says little about how long the host took.
 */
#define T6_CTRL_TIMEOUT_MS 5000
#define T6_BULK_TIMEOUT_MS 10000
#define T6_FENCE_TIMEOUT_MS 5000

/* Vendor requests (bRequest), MCT t6.h and the capture. */
#define T6_SET_MONITOR_CTRL 0x03
#define T6_SET_RESOLUTION_DETAIL 0x12
#define T6_CANCEL_BULK_OUT 0x14
#define T6_INIT 0x1c
#define T6_SET_LUT 0x1d
#define T6_SET_SOFTWARE_READY 0x31
#define T6_GET_EDID 0x80
#define T6_GET_TIMING_COUNT 0x84
#define T6_GET_STATUS 0x87
#define T6_GET_VRAM_SIZE 0x88
#define T6_GET_TIMING 0x89

/* Video commands and formats of the VIDEO_FLIP_HEADER. */
#define T6_CMD_FLIP_PRIMARY 3
#define T6_CMD_FLIP_SECONDARY 4
#define T6_FMT_NV12 6
#define T6_FMT_RGB32 8

/* Interrupt packet (T6INTERRUPTDATA). */
#define T6_FUNC_DISPLAY 0x04
#define T6_DISPLAY_DATA_AT 0x0c
#define T6_DISPLAY_EVENT_AT 0x13
#define T6_EVENT_HOTPLUG_0 0x01
#define T6_EVENT_HOTPLUG_1 0x02
#define T6_EVENT_FENCE_DONE 0x04

/*
 * VRAM map: output 0's framebuffer at MCT's first 1080p framebuffer address (0x2e00000) up
 * to the end of VRAM, output 1's from 16 MiB up to output 0's. Each flip's payload starts
 * 48 bytes below the framebuffer, so the pixels land at the framebuffer address.
 */
static const u32 t6_fb_addr[T6_OUTPUTS] = { 0x2e00000, 0x1000000 };

struct t6_device;

struct t6_output {
	struct t6_device *t6;
	unsigned int index;
	struct drm_connector connector;
	struct drm_simple_display_pipe pipe;
	u8 table[T6_MAX_RECORDS][T6_RECORD_LEN];
	unsigned int records;
	bool mode_ok;
	/* The page-flip event waiting for event_fence (guarded by t6->lock). */
	struct drm_pending_vblank_event *event;
	u32 event_fence;
	u32 sent; /* the last fence uploaded for this output */
	struct delayed_work fence_timeout;
};

struct t6_device {
	struct drm_device drm;
	struct usb_device *udev;
	struct usb_interface *intf;
	u8 ep_out;
	struct mutex io; /* one control or bulk conversation at a time; guards the buffers */
	u8 *ctrl_buf;
	u8 *hdr_buf;
	u8 *bulk_buf;
	u32 vram_size;
	spinlock_t lock;
	u32 fence_next;
	u32 fence_done;
	struct urb *irq_urb;
	u8 *irq_buf;
	unsigned int irq_errors;
	unsigned long hpd_pending;
	struct work_struct hpd_work;
	struct t6_output out[T6_OUTPUTS];
};

#define to_t6(d) container_of(d, struct t6_device, drm)

static const u32 t6_formats[] = { DRM_FORMAT_XRGB8888, DRM_FORMAT_NV12 };

/* ----- USB transfers ----- */

static int t6_ctrl_in(struct t6_device *t6, u8 req, u16 value, u16 index, void *data, u16 len)
{
	int ret;

	if (len > 512)
		return -EINVAL;
	mutex_lock(&t6->io);
	ret = usb_control_msg(t6->udev, usb_rcvctrlpipe(t6->udev, 0), req,
			      USB_DIR_IN | USB_TYPE_VENDOR | USB_RECIP_DEVICE, value, index,
			      t6->ctrl_buf, len, T6_CTRL_TIMEOUT_MS);
	if (ret >= 0)
		memcpy(data, t6->ctrl_buf, ret);
	mutex_unlock(&t6->io);
	return ret;
}

static int t6_ctrl_out(struct t6_device *t6, u8 req, u16 value, u16 index, const void *data,
		       u16 len)
{
	int ret;

	if (len > 512)
		return -EINVAL;
	mutex_lock(&t6->io);
	if (len)
		memcpy(t6->ctrl_buf, data, len);
	ret = usb_control_msg(t6->udev, usb_sndctrlpipe(t6->udev, 0), req,
			      USB_DIR_OUT | USB_TYPE_VENDOR | USB_RECIP_DEVICE, value, index,
			      len ? t6->ctrl_buf : NULL, len, T6_CTRL_TIMEOUT_MS);
	mutex_unlock(&t6->io);
	return ret < 0 ? ret : 0;
}

/*
 * One bulk OUT transfer of exactly len bytes; a short one is an error (-EIO), a stalled one
 * (-EPIPE) has its endpoint's halt cleared before it is returned. Holds t6->io.
 */
static int t6_bulk(struct t6_device *t6, void *buf, int len)
{
	int actual = 0, ret;

	ret = usb_bulk_msg(t6->udev, usb_sndbulkpipe(t6->udev, t6->ep_out), buf, len, &actual,
			   T6_BULK_TIMEOUT_MS);
	if (ret == -EPIPE) {
		/*
		 * A stall halts the endpoint, in the dock and in xHCI, until the host clears it:
		 * without this every later upload (the retry, the next frames) stalls too.
		 */
		int err = usb_clear_halt(t6->udev, usb_sndbulkpipe(t6->udev, t6->ep_out));

		if (err)
			drm_err(&t6->drm, "bulk OUT stalled; clearing its halt failed: %d\n", err);
	}
	if (ret)
		return ret;
	if (actual != len) {
		drm_err(&t6->drm, "bulk OUT: the dock took %d of %d bytes\n", actual, len);
		return -EIO;
	}
	return 0;
}

/* ----- the firmware timing table and modes ----- */

static int t6_read_table(struct t6_output *o)
{
	struct t6_device *t6 = o->t6;
	__le32 count;
	unsigned int total, at = 0;
	int ret;

	ret = t6_ctrl_in(t6, T6_GET_TIMING_COUNT, o->index, 0, &count, 4);
	if (ret != 4)
		return ret < 0 ? ret : -EPROTO;
	o->records = min_t(u32, le32_to_cpu(count), T6_MAX_RECORDS);
	total = o->records * T6_RECORD_LEN;
	while (at < total) {
		u16 n = min_t(unsigned int, total - at, 512);

		ret = t6_ctrl_in(t6, T6_GET_TIMING, o->index, at, (u8 *)o->table + at, n);
		if (ret != n)
			return ret < 0 ? ret : -EPROTO;
		at += n;
	}
	return 0;
}

/* The table record with the same timing as @m, or NULL. */
static const u8 *t6_find_record(struct t6_output *o, const struct drm_display_mode *m)
{
	unsigned int i;

	if (m->flags & (DRM_MODE_FLAG_INTERLACE | DRM_MODE_FLAG_DBLSCAN))
		return NULL;
	for (i = 0; i < o->records; i++) {
		const u8 *r = o->table[i];

		if (get_unaligned_le32(r) == m->clock && r[4] == drm_mode_vrefresh(m) &&
		    get_unaligned_le16(r + 6) == m->htotal &&
		    get_unaligned_le16(r + 8) == m->hdisplay &&
		    get_unaligned_le16(r + 10) == m->hsync_start &&
		    get_unaligned_le16(r + 12) == m->hsync_end - m->hsync_start &&
		    get_unaligned_le16(r + 14) == m->vtotal &&
		    get_unaligned_le16(r + 16) == m->vdisplay &&
		    get_unaligned_le16(r + 18) == m->vsync_start &&
		    get_unaligned_le16(r + 20) == m->vsync_end - m->vsync_start &&
		    (r[28] == 1) == !!(m->flags & DRM_MODE_FLAG_PHSYNC) &&
		    (r[29] == 1) == !!(m->flags & DRM_MODE_FLAG_PVSYNC))
			return r;
	}
	return NULL;
}

static u32 t6_fb_room(struct t6_output *o)
{
	u32 end = o->index == 0 ? o->t6->vram_size : t6_fb_addr[0];

	return end > t6_fb_addr[o->index] ? end - t6_fb_addr[o->index] : 0;
}

static enum drm_mode_status t6_check_mode(struct t6_output *o, const struct drm_display_mode *m)
{
	if (!t6_find_record(o, m))
		return MODE_BAD;
	/* The largest frame (XRGB8888) must fit the output's framebuffer room. */
	if ((u64)m->hdisplay * m->vdisplay * 4 > t6_fb_room(o))
		return MODE_MEM;
	return MODE_OK;
}

static void t6_record_to_mode(const u8 *r, struct drm_display_mode *m)
{
	m->clock = get_unaligned_le32(r);
	m->htotal = get_unaligned_le16(r + 6);
	m->hdisplay = get_unaligned_le16(r + 8);
	m->hsync_start = get_unaligned_le16(r + 10);
	m->hsync_end = m->hsync_start + get_unaligned_le16(r + 12);
	m->vtotal = get_unaligned_le16(r + 14);
	m->vdisplay = get_unaligned_le16(r + 16);
	m->vsync_start = get_unaligned_le16(r + 18);
	m->vsync_end = m->vsync_start + get_unaligned_le16(r + 20);
	m->flags = (r[28] == 1 ? DRM_MODE_FLAG_PHSYNC : DRM_MODE_FLAG_NHSYNC) |
		   (r[29] == 1 ? DRM_MODE_FLAG_PVSYNC : DRM_MODE_FLAG_NVSYNC);
	m->type = DRM_MODE_TYPE_DRIVER;
	drm_mode_set_name(m);
}

/* ----- connectors ----- */

static int t6_edid_block(void *data, u8 *buf, unsigned int block, size_t len)
{
	struct t6_output *o = data;
	int ret;

	ret = t6_ctrl_in(o->t6, T6_GET_EDID, block * EDID_LENGTH, o->index, buf, len);
	if (ret != len)
		return ret < 0 ? ret : -EPROTO;
	return 0;
}

static int t6_get_modes(struct drm_connector *connector)
{
	struct t6_output *o = container_of(connector, struct t6_output, connector);
	struct drm_device *drm = connector->dev;
	struct edid *edid;
	unsigned int i;
	int n = 0, idx;

	if (!drm_dev_enter(drm, &idx))
		return 0;
	edid = drm_do_get_edid(connector, t6_edid_block, o);
	drm_dev_exit(idx);
	drm_connector_update_edid_property(connector, edid);
	if (edid) {
		n = drm_add_edid_modes(connector, edid);
		kfree(edid);
		return n;
	}
	/* No EDID: offer the dock's own table. */
	drm_warn(drm, "output %u: no EDID; offering the dock's %u timings\n", o->index, o->records);
	for (i = 0; i < o->records; i++) {
		struct drm_display_mode *m = drm_mode_create(drm);

		if (!m)
			break;
		t6_record_to_mode(o->table[i], m);
		drm_mode_probed_add(connector, m);
		n++;
	}
	return n;
}

static enum drm_mode_status t6_conn_mode_valid(struct drm_connector *connector,
					       struct drm_display_mode *mode)
{
	return t6_check_mode(container_of(connector, struct t6_output, connector), mode);
}

static int t6_detect_ctx(struct drm_connector *connector, struct drm_modeset_acquire_ctx *ctx,
			 bool force)
{
	struct t6_output *o = container_of(connector, struct t6_output, connector);
	struct drm_device *drm = connector->dev;
	u8 status;
	int ret, idx;

	if (!drm_dev_enter(drm, &idx))
		return connector_status_disconnected;
	ret = t6_ctrl_in(o->t6, T6_GET_STATUS, o->index, 0, &status, 1);
	drm_dev_exit(idx);
	if (ret != 1) {
		drm_err(drm, "output %u: connection status failed: %d\n", o->index, ret);
		return connector_status_unknown;
	}
	return status ? connector_status_connected : connector_status_disconnected;
}

static const struct drm_connector_helper_funcs t6_conn_helper_funcs = {
	.get_modes = t6_get_modes,
	.mode_valid = t6_conn_mode_valid,
	.detect_ctx = t6_detect_ctx,
};

static const struct drm_connector_funcs t6_conn_funcs = {
	.reset = drm_atomic_helper_connector_reset,
	.fill_modes = drm_helper_probe_single_connector_modes,
	.destroy = drm_connector_cleanup,
	.atomic_duplicate_state = drm_atomic_helper_connector_duplicate_state,
	.atomic_destroy_state = drm_atomic_helper_connector_destroy_state,
};

static void t6_hpd_work(struct work_struct *work)
{
	struct t6_device *t6 = container_of(work, struct t6_device, hpd_work);
	unsigned int i;

	drm_helper_hpd_irq_event(&t6->drm);
	for (i = 0; i < T6_OUTPUTS; i++) {
		if (!test_and_clear_bit(i, &t6->hpd_pending))
			continue;
		drm_info(&t6->drm, "output %u: hotplug interrupt, %s is %s\n", i,
			 t6->out[i].connector.name,
			 drm_get_connector_status_name(t6->out[i].connector.status));
	}
}

/* ----- fences and page-flip events ----- */

static void t6_send_event(struct t6_output *o, struct drm_pending_vblank_event *event)
{
	unsigned long flags;

	spin_lock_irqsave(&o->t6->drm.event_lock, flags);
	drm_crtc_send_vblank_event(&o->pipe.crtc, event);
	spin_unlock_irqrestore(&o->t6->drm.event_lock, flags);
}

/* Takes the event waiting on @o when its fence is at most @done (0: whatever it waits for). */
static struct drm_pending_vblank_event *t6_take_event(struct t6_output *o, u32 done, u32 *fence)
{
	struct drm_pending_vblank_event *event = NULL;
	unsigned long flags;

	spin_lock_irqsave(&o->t6->lock, flags);
	*fence = o->event_fence;
	if (o->event_fence && (!done || o->event_fence <= done)) {
		event = o->event;
		o->event = NULL;
		o->event_fence = 0;
	} else {
		*fence = 0;
	}
	spin_unlock_irqrestore(&o->t6->lock, flags);
	return event;
}

static void t6_fence_done(struct t6_device *t6, u32 fence)
{
	struct drm_pending_vblank_event *event;
	unsigned long flags;
	unsigned int i;
	u32 waited;

	spin_lock_irqsave(&t6->lock, flags);
	if (fence > t6->fence_done)
		t6->fence_done = fence;
	spin_unlock_irqrestore(&t6->lock, flags);
	for (i = 0; i < T6_OUTPUTS; i++) {
		struct t6_output *o = &t6->out[i];
		bool mine;

		event = t6_take_event(o, fence, &waited);
		spin_lock_irqsave(&t6->lock, flags);
		mine = o->sent == fence;
		spin_unlock_irqrestore(&t6->lock, flags);
		if (!waited) {
			if (mine)
				drm_info(&t6->drm, "output %u: fence %u done after its timeout\n", i,
					 fence);
			continue;
		}
		cancel_delayed_work(&o->fence_timeout);
		drm_info(&t6->drm, "output %u: fence %u done\n", i, waited);
		if (event)
			t6_send_event(o, event);
	}
}

static void t6_fence_timeout(struct work_struct *work)
{
	struct t6_output *o = container_of(to_delayed_work(work), struct t6_output, fence_timeout);
	struct drm_pending_vblank_event *event;
	u32 fence;

	event = t6_take_event(o, 0, &fence);
	if (!fence)
		return;
	drm_err(&o->t6->drm, "output %u: fence %u did not come back %d ms after its upload; completing the flip without it\n",
		o->index, fence, T6_FENCE_TIMEOUT_MS);
	if (event)
		t6_send_event(o, event);
}

/* Completes whatever @o waits for, now (the upload failed or the dock is gone). */
static void t6_fence_abandon(struct t6_output *o, const char *why)
{
	struct drm_pending_vblank_event *event;
	u32 fence;

	event = t6_take_event(o, 0, &fence);
	if (!fence)
		return;
	drm_err(&o->t6->drm, "output %u: fence %u abandoned (%s); completing the flip\n", o->index,
		fence, why);
	if (event)
		t6_send_event(o, event);
}

static void t6_irq_complete(struct urb *urb)
{
	struct t6_device *t6 = urb->context;
	const u8 *p = t6->irq_buf;
	int ret;

	switch (urb->status) {
	case 0:
		t6->irq_errors = 0;
		break;
	case -ENOENT:
	case -ECONNRESET:
	case -ESHUTDOWN:
		return; /* killed */
	default:
		if (++t6->irq_errors > 8) {
			drm_err(&t6->drm, "interrupt IN: status %d, %u errors in a row; no more hotplug or fence events\n",
				urb->status, t6->irq_errors);
			return;
		}
		drm_err_ratelimited(&t6->drm, "interrupt IN: status %d; listening again\n",
				    urb->status);
		goto resubmit;
	}
	if (urb->actual_length > T6_DISPLAY_EVENT_AT && (p[0] & T6_FUNC_DISPLAY)) {
		u8 ev = p[T6_DISPLAY_EVENT_AT];

		if (ev & T6_EVENT_HOTPLUG_0)
			set_bit(0, &t6->hpd_pending);
		if (ev & T6_EVENT_HOTPLUG_1)
			set_bit(1, &t6->hpd_pending);
		if (ev & (T6_EVENT_HOTPLUG_0 | T6_EVENT_HOTPLUG_1))
			schedule_work(&t6->hpd_work);
		if (ev & T6_EVENT_FENCE_DONE)
			t6_fence_done(t6, get_unaligned_le32(p + T6_DISPLAY_DATA_AT));
	}
resubmit:
	ret = usb_submit_urb(urb, GFP_ATOMIC);
	if (ret && ret != -ENODEV && ret != -EPERM)
		drm_err(&t6->drm, "interrupt IN: resubmit failed: %d\n", ret);
}

/* ----- frames ----- */

/* One flip's payload: the video header, then each plane's visible lines packed. */
struct t6_frame {
	u8 header[T6_VIDEO_HEADER_LEN];
	const u8 *src[2];
	u32 pitch[2];
	u32 line[2];
	u32 lines[2];
	unsigned int planes;
	size_t pixels;
};

static void t6_frame_init(struct t6_frame *f, struct t6_output *o, struct drm_framebuffer *fb,
			  const struct iosys_map *data, u32 fence)
{
	u32 w = fb->width, h = fb->height, addr = t6_fb_addr[o->index];
	bool nv12 = fb->format->format == DRM_FORMAT_NV12;
	u8 *hd = f->header;

	memset(f, 0, sizeof(*f));
	f->planes = nv12 ? 2 : 1;
	f->src[0] = data[0].vaddr;
	f->pitch[0] = fb->pitches[0];
	f->line[0] = nv12 ? w : w * 4;
	f->lines[0] = h;
	if (nv12) {
		f->src[1] = data[1].vaddr;
		f->pitch[1] = fb->pitches[1];
		f->line[1] = w;
		f->lines[1] = DIV_ROUND_UP(h, 2);
	}
	f->pixels = (size_t)f->line[0] * f->lines[0] + (size_t)f->line[1] * f->lines[1];

	put_unaligned_le32(o->index ? T6_CMD_FLIP_SECONDARY : T6_CMD_FLIP_PRIMARY, hd + 0);
	put_unaligned_le32(f->pixels, hd + 4);
	put_unaligned_le32(fence, hd + 8);
	put_unaligned_le32(nv12 ? T6_FMT_NV12 : T6_FMT_RGB32, hd + 12);
	put_unaligned_le16(f->line[0], hd + 16);
	put_unaligned_le16(f->line[1], hd + 18);
	put_unaligned_le32(addr, hd + 20);
	put_unaligned_le32(nv12 ? addr + f->line[0] * f->lines[0] : 0, hd + 24);
	put_unaligned_le32(0, hd + 28);
	put_unaligned_le32(nv12 ? T6_FMT_NV12 : T6_FMT_RGB32, hd + 32);
}

/* Copies payload bytes [off, off + len) of @f to @dst. */
static void t6_frame_fill(const struct t6_frame *f, u8 *dst, size_t off, size_t len)
{
	while (len) {
		size_t n, p = off;
		unsigned int i;

		if (p < T6_VIDEO_HEADER_LEN) {
			n = min(len, T6_VIDEO_HEADER_LEN - p);
			memcpy(dst, f->header + p, n);
		} else {
			p -= T6_VIDEO_HEADER_LEN;
			for (i = 0; i < f->planes; i++) {
				size_t size = (size_t)f->line[i] * f->lines[i];

				if (p < size)
					break;
				p -= size;
			}
			if (i == f->planes) {
				memset(dst, 0, len);
				return;
			}
			n = min(len, f->line[i] - p % f->line[i]);
			memcpy(dst, f->src[i] + (p / f->line[i]) * f->pitch[i] + p % f->line[i], n);
		}
		dst += n;
		off += n;
		len -= n;
	}
}

/* Sends one payload as DMA-framed fragments. Holds t6->io. */
static int t6_send_payload(struct t6_device *t6, u32 addr, const struct t6_frame *f)
{
	size_t total = T6_VIDEO_HEADER_LEN + f->pixels, off;
	u8 *h = t6->hdr_buf;
	int ret;

	for (off = 0; off < total; off += T6_CHUNK) {
		size_t n = min_t(size_t, total - off, T6_CHUNK);

		memset(h, 0, T6_DMA_HEADER_LEN);
		put_unaligned_le32(0, h + 0); /* session 0: display */
		put_unaligned_le32(total, h + 4);
		put_unaligned_le32(addr, h + 8);
		put_unaligned_le32(n, h + 12);
		put_unaligned_le32(off, h + 16);
		h[20] = off + n < total ? 1 : 0;
		ret = t6_bulk(t6, h, T6_DMA_HEADER_LEN);
		if (ret)
			return ret;
		t6_frame_fill(f, t6->bulk_buf, off, n);
		ret = t6_bulk(t6, t6->bulk_buf, n);
		if (ret)
			return ret;
	}
	return 0;
}

/* Uploads and flips one frame; on an error cancels the dock's DMA receiver and tries once more. */
static int t6_upload(struct t6_output *o, struct drm_framebuffer *fb, const struct iosys_map *data,
		     u32 fence)
{
	struct t6_device *t6 = o->t6;
	u32 addr = t6_fb_addr[o->index] - T6_VIDEO_HEADER_LEN;
	struct t6_frame f;
	int attempt, ret, err;

	t6_frame_init(&f, o, fb, data, fence);
	drm_info(&t6->drm, "output %u: flip fence %u: %s %ux%u at %#x pitch %u, %zu bytes\n",
		 o->index, fence, f.planes == 2 ? "NV12" : "XRGB8888", fb->width, fb->height,
		 t6_fb_addr[o->index], f.line[0], f.pixels);
	for (attempt = 1;; attempt++) {
		mutex_lock(&t6->io);
		ret = t6_send_payload(t6, addr, &f);
		mutex_unlock(&t6->io);
		if (!ret)
			return 0;
		if (ret == -ENODEV || ret == -ESHUTDOWN || attempt == 2) {
			drm_err(&t6->drm, "output %u: upload of fence %u failed: %d; giving up (%s)\n",
				o->index, fence, ret, attempt == 2 ? "second try" : "the dock is gone");
			return ret;
		}
		drm_err(&t6->drm, "output %u: upload of fence %u failed: %d; cancelling the dock's DMA and sending it again\n",
			o->index, fence, ret);
		/* The dock may hold half a command: drop it (MCT does the same after bulk errors). */
		err = t6_ctrl_out(t6, T6_CANCEL_BULK_OUT, 0, 0, NULL, 0);
		if (err) {
			drm_err(&t6->drm, "output %u: cancelling the dock's DMA failed: %d; giving up\n",
				o->index, err);
			return ret;
		}
	}
}

/* ----- the display pipes ----- */

static int t6_modeset(struct t6_output *o, const u8 *rec, const char **step)
{
	static const u16 channels[] = { 0x100, 0x200, 0x400 };
	struct t6_device *t6 = o->t6;
	u8 ramp[256];
	unsigned int i;
	int ret;

	*step = "set_mode";
	ret = t6_ctrl_out(t6, T6_SET_RESOLUTION_DETAIL, o->index, 0, rec, T6_RECORD_LEN);
	if (ret)
		return ret;
	*step = "set_ready";
	ret = t6_ctrl_out(t6, T6_SET_SOFTWARE_READY, o->index, 0, NULL, 0);
	if (ret)
		return ret;
	*step = "set_monitor";
	ret = t6_ctrl_out(t6, T6_SET_MONITOR_CTRL, o->index, 1, NULL, 0);
	if (ret)
		return ret;
	*step = "set_lut";
	for (i = 0; i < 256; i++)
		ramp[i] = i;
	for (i = 0; i < ARRAY_SIZE(channels); i++) {
		ret = t6_ctrl_out(t6, T6_SET_LUT, 0, channels[i], ramp, sizeof(ramp));
		if (ret)
			return ret;
	}
	*step = "finalise";
	return t6_ctrl_out(t6, T6_INIT, 0x0002, 0, NULL, 0);
}

static void t6_pipe_enable(struct drm_simple_display_pipe *pipe, struct drm_crtc_state *crtc_state,
			   struct drm_plane_state *plane_state)
{
	struct t6_output *o = container_of(pipe, struct t6_output, pipe);
	struct drm_device *drm = pipe->crtc.dev;
	const struct drm_display_mode *m = &crtc_state->mode;
	const u8 *rec = t6_find_record(o, m);
	const char *step = "";
	int attempt, ret, idx;

	o->mode_ok = false;
	if (!rec || !drm_dev_enter(drm, &idx))
		return;
	for (attempt = 1;; attempt++) {
		bool last;

		ret = t6_modeset(o, rec, &step);
		if (!ret)
			break;
		last = attempt == 2 || ret == -ENODEV || ret == -ESHUTDOWN;
		drm_err(drm, "output %u: modeset %dx%d@%d failed at %s: %d; %s\n", o->index,
			m->hdisplay, m->vdisplay, drm_mode_vrefresh(m), step, ret,
			last ? "giving up" : "retrying");
		if (last)
			break;
	}
	drm_dev_exit(idx);
	o->mode_ok = !ret;
	if (!ret)
		drm_info(drm, "output %u: mode %dx%d@%d set (%d kHz, table record %td)\n", o->index,
			 m->hdisplay, m->vdisplay, drm_mode_vrefresh(m), m->clock,
			 (rec - o->table[0]) / T6_RECORD_LEN);
}

static void t6_pipe_disable(struct drm_simple_display_pipe *pipe)
{
	struct t6_output *o = container_of(pipe, struct t6_output, pipe);
	struct drm_device *drm = pipe->crtc.dev;
	int ret, idx;

	o->mode_ok = false;
	cancel_delayed_work_sync(&o->fence_timeout);
	t6_fence_abandon(o, "output disabled");
	if (!drm_dev_enter(drm, &idx))
		return;
	ret = t6_ctrl_out(o->t6, T6_SET_MONITOR_CTRL, o->index, 0, NULL, 0);
	drm_dev_exit(idx);
	if (ret)
		drm_err(drm, "output %u: turning the output off failed: %d\n", o->index, ret);
	else
		drm_info(drm, "output %u: off\n", o->index);
}

static enum drm_mode_status t6_pipe_mode_valid(struct drm_simple_display_pipe *pipe,
					       const struct drm_display_mode *mode)
{
	return t6_check_mode(container_of(pipe, struct t6_output, pipe), mode);
}

static void t6_pipe_update(struct drm_simple_display_pipe *pipe,
			   struct drm_plane_state *old_state)
{
	struct t6_output *o = container_of(pipe, struct t6_output, pipe);
	struct t6_device *t6 = o->t6;
	struct drm_plane_state *state = pipe->plane.state;
	struct drm_shadow_plane_state *shadow = to_drm_shadow_plane_state(state);
	struct drm_crtc *crtc = &pipe->crtc;
	struct drm_pending_vblank_event *event = crtc->state->event, *stale;
	struct drm_rect damage;
	unsigned long flags;
	u32 fence, stale_fence;
	int ret, idx;

	crtc->state->event = NULL;
	if (!state->fb || !crtc->state->active || !o->mode_ok ||
	    !drm_atomic_helper_damage_merged(old_state, state, &damage) ||
	    !drm_dev_enter(crtc->dev, &idx)) {
		if (state->fb && crtc->state->active)
			drm_info(crtc->dev, "output %u: frame not sent (%s)\n", o->index,
				 o->mode_ok ? "no damage, or the dock is gone" : "no mode set");
		if (event)
			t6_send_event(o, event);
		return;
	}
	spin_lock_irqsave(&t6->lock, flags);
	fence = ++t6->fence_next;
	o->sent = fence;
	stale = o->event;
	stale_fence = o->event_fence;
	o->event = event;
	o->event_fence = fence;
	spin_unlock_irqrestore(&t6->lock, flags);
	if (stale_fence) {
		drm_err(crtc->dev, "output %u: fence %u still outstanding at fence %u\n", o->index,
			stale_fence, fence);
		if (stale)
			t6_send_event(o, stale);
	}
	ret = t6_upload(o, state->fb, shadow->data, fence);
	drm_dev_exit(idx);
	if (ret)
		t6_fence_abandon(o, "upload failed");
	else
		mod_delayed_work(system_wq, &o->fence_timeout,
				 msecs_to_jiffies(T6_FENCE_TIMEOUT_MS));
}

static const struct drm_simple_display_pipe_funcs t6_pipe_funcs = {
	.mode_valid = t6_pipe_mode_valid,
	.enable = t6_pipe_enable,
	.disable = t6_pipe_disable,
	.update = t6_pipe_update,
	DRM_GEM_SIMPLE_DISPLAY_PIPE_SHADOW_PLANE_FUNCS,
};

/* Enables before planes: a modeset's first frame goes out after the mode is set. */
static const struct drm_mode_config_helper_funcs t6_mode_config_helpers = {
	.atomic_commit_tail = drm_atomic_helper_commit_tail_rpm,
};

static const struct drm_mode_config_funcs t6_mode_config_funcs = {
	.fb_create = drm_gem_fb_create_with_dirty,
	.atomic_check = drm_atomic_helper_check,
	.atomic_commit = drm_atomic_helper_commit,
};

DEFINE_DRM_GEM_FOPS(t6_fops);

static const struct drm_driver t6_driver = {
	.driver_features = DRIVER_MODESET | DRIVER_GEM | DRIVER_ATOMIC,
	.fops = &t6_fops,
	DRM_GEM_SHMEM_DRIVER_OPS,
	.name = "trigger6",
	.desc = "MCT Trigger 6 USB display (Calametra guest driver)",
	.date = "20260101",
	.major = 1,
	.minor = 0,
};

/* ----- the USB driver ----- */

static void t6_release_urb(struct drm_device *drm, void *data)
{
	struct t6_device *t6 = data;

	usb_kill_urb(t6->irq_urb);
	usb_free_urb(t6->irq_urb);
}

static int t6_init_dock(struct t6_device *t6)
{
	u8 mib;
	int ret;

	ret = t6_ctrl_in(t6, T6_GET_VRAM_SIZE, 0, 0, &mib, 1);
	if (ret != 1)
		return ret < 0 ? ret : -EPROTO;
	t6->vram_size = (u32)mib << 20;
	if (t6->vram_size <= t6_fb_addr[0])
		return -ENOSPC;
	ret = t6_ctrl_out(t6, T6_INIT, 0x0000, 0, NULL, 0);
	if (!ret)
		ret = t6_ctrl_out(t6, T6_INIT, 0x0100, 0, NULL, 0);
	if (!ret)
		ret = t6_ctrl_out(t6, T6_SET_SOFTWARE_READY, 0, 0, NULL, 0);
	return ret;
}

static int t6_probe(struct usb_interface *intf, const struct usb_device_id *id)
{
	struct usb_endpoint_descriptor *bulk_out, *int_in;
	struct t6_device *t6;
	struct drm_device *drm;
	unsigned int i;
	int ret;

	ret = usb_find_common_endpoints(intf->cur_altsetting, NULL, &bulk_out, &int_in, NULL);
	if (ret)
		return ret;
	t6 = devm_drm_dev_alloc(&intf->dev, &t6_driver, struct t6_device, drm);
	if (IS_ERR(t6))
		return PTR_ERR(t6);
	drm = &t6->drm;
	t6->intf = intf;
	t6->udev = interface_to_usbdev(intf);
	t6->ep_out = usb_endpoint_num(bulk_out);
	mutex_init(&t6->io);
	spin_lock_init(&t6->lock);
	INIT_WORK(&t6->hpd_work, t6_hpd_work);
	t6->ctrl_buf = drmm_kmalloc(drm, 512, GFP_KERNEL);
	t6->hdr_buf = drmm_kmalloc(drm, T6_DMA_HEADER_LEN, GFP_KERNEL);
	t6->bulk_buf = drmm_kmalloc(drm, T6_CHUNK, GFP_KERNEL);
	t6->irq_buf = drmm_kmalloc(drm, T6_INTR_LEN, GFP_KERNEL);
	if (!t6->ctrl_buf || !t6->hdr_buf || !t6->bulk_buf || !t6->irq_buf)
		return -ENOMEM;
	usb_set_intfdata(intf, t6);

	ret = t6_init_dock(t6);
	if (ret) {
		drm_err(drm, "dock init failed: %d\n", ret);
		return ret;
	}

	ret = drmm_mode_config_init(drm);
	if (ret)
		return ret;
	drm->mode_config.min_width = 640;
	drm->mode_config.min_height = 480;
	drm->mode_config.max_width = DRM_SHADOW_PLANE_MAX_WIDTH;
	drm->mode_config.max_height = DRM_SHADOW_PLANE_MAX_HEIGHT;
	drm->mode_config.preferred_depth = 24;
	drm->mode_config.funcs = &t6_mode_config_funcs;
	drm->mode_config.helper_private = &t6_mode_config_helpers;

	for (i = 0; i < T6_OUTPUTS; i++) {
		struct t6_output *o = &t6->out[i];

		o->t6 = t6;
		o->index = i;
		INIT_DELAYED_WORK(&o->fence_timeout, t6_fence_timeout);
		ret = t6_read_table(o);
		if (ret) {
			drm_err(drm, "output %u: reading the timing table failed: %d\n", i, ret);
			return ret;
		}
		ret = drm_connector_init(drm, &o->connector, &t6_conn_funcs,
					 i == 0 ? DRM_MODE_CONNECTOR_HDMIA : DRM_MODE_CONNECTOR_VGA);
		if (ret)
			return ret;
		drm_connector_helper_add(&o->connector, &t6_conn_helper_funcs);
		o->connector.polled = DRM_CONNECTOR_POLL_HPD;
		ret = drm_simple_display_pipe_init(drm, &o->pipe, &t6_pipe_funcs, t6_formats,
						   ARRAY_SIZE(t6_formats), NULL, &o->connector);
		if (ret)
			return ret;
		drm_plane_enable_fb_damage_clips(&o->pipe.plane);
	}
	drm_mode_config_reset(drm);

	t6->irq_urb = usb_alloc_urb(0, GFP_KERNEL);
	if (!t6->irq_urb)
		return -ENOMEM;
	ret = drmm_add_action_or_reset(drm, t6_release_urb, t6);
	if (ret)
		return ret;
	usb_fill_int_urb(t6->irq_urb, t6->udev, usb_rcvintpipe(t6->udev, int_in->bEndpointAddress),
			 t6->irq_buf, T6_INTR_LEN, t6_irq_complete, t6, int_in->bInterval);
	ret = usb_submit_urb(t6->irq_urb, GFP_KERNEL);
	if (ret)
		return ret;

	drm_kms_helper_poll_init(drm);
	ret = drm_dev_register(drm, 0);
	if (ret) {
		drm_kms_helper_poll_fini(drm);
		return ret;
	}
	drm_info(drm, "MCT Trigger 6: %u MiB VRAM, %u + %u timings, framebuffers at %#x and %#x\n",
		 t6->vram_size >> 20, t6->out[0].records, t6->out[1].records, t6_fb_addr[0],
		 t6_fb_addr[1]);
	return 0;
}

static void t6_disconnect(struct usb_interface *intf)
{
	struct t6_device *t6 = usb_get_intfdata(intf);
	struct drm_device *drm = &t6->drm;
	unsigned int i;

	drm_info(drm, "dock disconnected\n");
	drm_kms_helper_poll_fini(drm);
	drm_dev_unplug(drm);
	usb_kill_urb(t6->irq_urb);
	cancel_work_sync(&t6->hpd_work);
	for (i = 0; i < T6_OUTPUTS; i++) {
		cancel_delayed_work_sync(&t6->out[i].fence_timeout);
		t6_fence_abandon(&t6->out[i], "dock disconnected");
	}
	drm_atomic_helper_shutdown(drm);
}

static const struct usb_device_id t6_ids[] = {
	{ USB_DEVICE_INTERFACE_CLASS(0x0711, 0x5601, USB_CLASS_VENDOR_SPEC) },
	{}
};
MODULE_DEVICE_TABLE(usb, t6_ids);

static struct usb_driver t6_usb_driver = {
	.name = "trigger6",
	.probe = t6_probe,
	.disconnect = t6_disconnect,
	.id_table = t6_ids,
};
module_usb_driver(t6_usb_driver);

MODULE_DESCRIPTION("MCT Trigger 6 USB display (j5create JCD543), Calametra guest driver");
MODULE_LICENSE("GPL");

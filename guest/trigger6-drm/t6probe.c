// SPDX-License-Identifier: GPL-2.0
/*
 * t6probe: the guest side of Calametra's Trigger 6 KMS test. Opens /dev/dri/card0 (the
 * trigger6 DRM driver), lists its connectors, sets 1920x1080@60 on the connected one with a
 * first NV12 frame (mid grey), page-flips once to the 100% colour bars the Calametra model
 * checks (8-bit BT.601 limited range: white, yellow, cyan, green, magenta, red, blue, black,
 * 240 pixels each, NV12 with pitch = width and the UV plane right after the Y plane), waits
 * for the flip event, and with --wait-unplug N polls the connector until the monitor is gone.
 *
 * Every line it prints starts with "T6PROBE " and is key=value, for the host test to parse.
 * Raw DRM ioctls only (the kernel's uapi headers), built static with the host's gcc.
 *
 * Usage: t6probe [--wait-unplug SECONDS]
 */
#include <drm/drm.h>
#include <drm/drm_fourcc.h>
#include <drm/drm_mode.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define W 1920
#define H 1080
#define MAX 16

static const uint8_t BARS[8][3] = {
	{ 235, 128, 128 }, /* white */
	{ 210, 16, 146 },  /* yellow */
	{ 170, 166, 16 },  /* cyan */
	{ 145, 54, 34 },   /* green */
	{ 106, 202, 222 }, /* magenta */
	{ 81, 90, 240 },   /* red */
	{ 41, 240, 110 },  /* blue */
	{ 16, 128, 128 },  /* black */
};

static int fd = -1;

static int xioctl(unsigned long req, void *arg)
{
	int r;

	do {
		r = ioctl(fd, req, arg);
	} while (r == -1 && (errno == EINTR || errno == EAGAIN));
	return r == -1 ? -errno : 0;
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static const char *type_name(uint32_t t)
{
	switch (t) {
	case DRM_MODE_CONNECTOR_VGA: return "VGA";
	case DRM_MODE_CONNECTOR_HDMIA: return "HDMI-A";
	case DRM_MODE_CONNECTOR_DisplayPort: return "DP";
	default: return "Unknown";
	}
}

static const char *status_name(uint32_t s)
{
	return s == 1 ? "connected" : s == 2 ? "disconnected" : "unknown";
}

struct conn {
	uint32_t id, type, type_id, status, encoder, nmodes;
	struct drm_mode_modeinfo modes[64];
};

/* GETCONNECTOR twice: the first call (no mode buffer) makes the kernel probe the connector. */
static int get_connector(uint32_t id, struct conn *c)
{
	struct drm_mode_get_connector gc;
	uint32_t encoders[MAX];
	int r;

	memset(&gc, 0, sizeof(gc));
	gc.connector_id = id;
	r = xioctl(DRM_IOCTL_MODE_GETCONNECTOR, &gc);
	if (r)
		return r;
	if (gc.count_modes > 64)
		gc.count_modes = 64;
	if (gc.count_encoders > MAX)
		gc.count_encoders = MAX;
	gc.modes_ptr = (uintptr_t)c->modes;
	gc.encoders_ptr = (uintptr_t)encoders;
	gc.count_props = 0;
	r = xioctl(DRM_IOCTL_MODE_GETCONNECTOR, &gc);
	if (r)
		return r;
	c->id = id;
	c->type = gc.connector_type;
	c->type_id = gc.connector_type_id;
	c->status = gc.connection;
	c->encoder = gc.count_encoders ? encoders[0] : 0;
	c->nmodes = gc.count_modes > 64 ? 64 : gc.count_modes;
	return 0;
}

static const struct drm_mode_modeinfo *find_1080p60(const struct conn *c)
{
	uint32_t i;

	for (i = 0; i < c->nmodes; i++) {
		const struct drm_mode_modeinfo *m = &c->modes[i];

		if (m->hdisplay == W && m->vdisplay == H && m->vrefresh == 60 &&
		    !(m->flags & DRM_MODE_FLAG_INTERLACE))
			return m;
	}
	return NULL;
}

static void print_connector(const struct conn *c)
{
	const struct drm_mode_modeinfo *m = find_1080p60(c);

	printf("T6PROBE connector id=%u name=%s-%u status=%s modes=%u 1080p60=%s\n", c->id,
	       type_name(c->type), c->type_id, status_name(c->status), c->nmodes,
	       m ? "yes" : "no");
}

struct fb {
	uint32_t handle, pitch, fb_id;
	uint64_t size;
	uint8_t *map;
};

/* An NV12 1920x1080 framebuffer in one dumb buffer: Y plane, then the UV plane. */
static int make_fb(struct fb *f)
{
	struct drm_mode_create_dumb cd = { .height = H * 3 / 2, .width = W, .bpp = 8 };
	struct drm_mode_map_dumb md = { 0 };
	struct drm_mode_fb_cmd2 fc = { 0 };
	int r;

	r = xioctl(DRM_IOCTL_MODE_CREATE_DUMB, &cd);
	if (r)
		return r;
	f->handle = cd.handle;
	f->pitch = cd.pitch;
	f->size = cd.size;
	md.handle = cd.handle;
	r = xioctl(DRM_IOCTL_MODE_MAP_DUMB, &md);
	if (r)
		return r;
	f->map = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, md.offset);
	if (f->map == MAP_FAILED)
		return -errno;
	fc.width = W;
	fc.height = H;
	fc.pixel_format = DRM_FORMAT_NV12;
	fc.handles[0] = fc.handles[1] = f->handle;
	fc.pitches[0] = fc.pitches[1] = f->pitch;
	fc.offsets[0] = 0;
	fc.offsets[1] = f->pitch * H;
	r = xioctl(DRM_IOCTL_MODE_ADDFB2, &fc);
	if (r)
		return r;
	f->fb_id = fc.fb_id;
	return 0;
}

static void fill_grey(struct fb *f)
{
	memset(f->map, 128, f->size);
}

static void fill_bars(struct fb *f)
{
	uint8_t *y = f->map, *uv = f->map + (size_t)f->pitch * H;
	int x, row, bar = W / 8;

	for (x = 0; x < W; x++)
		y[x] = BARS[x / bar][0];
	for (x = 0; x < W; x += 2) {
		uv[x] = BARS[x / bar][1];
		uv[x + 1] = BARS[x / bar][2];
	}
	for (row = 1; row < H; row++)
		memcpy(y + (size_t)row * f->pitch, y, W);
	for (row = 1; row < H / 2; row++)
		memcpy(uv + (size_t)row * f->pitch, uv, W);
}

/* FNV-1a 64 over the visible Y then UV bytes: the checksum the host asserts. */
static uint64_t checksum(const struct fb *f)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const uint8_t *p;
	int row, x;

	for (row = 0; row < H + H / 2; row++) {
		p = f->map + (size_t)row * f->pitch;
		for (x = 0; x < W; x++)
			h = (h ^ p[x]) * 0x100000001b3ULL;
	}
	return h;
}

int main(int argc, char **argv)
{
	struct drm_mode_card_res res = { 0 };
	uint32_t conn_ids[MAX], crtc_ids[MAX], enc_ids[MAX], fb_ids[MAX];
	static struct conn conns[MAX];
	struct conn *use = NULL;
	const struct drm_mode_modeinfo *mode = NULL;
	struct drm_mode_get_encoder enc = { 0 };
	struct drm_mode_crtc set = { 0 }, get = { 0 };
	struct drm_mode_crtc_page_flip flip = { 0 };
	struct fb a = { 0 }, b = { 0 };
	int wait_unplug = 0, i, r, tries, busy;
	uint32_t crtc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait-unplug") && i + 1 < argc)
			wait_unplug = atoi(argv[++i]);
	}

	for (tries = 0; tries < 200; tries++) {
		fd = open("/dev/dri/card0", O_RDWR | O_CLOEXEC);
		if (fd >= 0)
			break;
		msleep(100);
	}
	if (fd < 0) {
		printf("T6PROBE error=open-card0 errno=%d\n", errno);
		return 2;
	}
	printf("T6PROBE opened=/dev/dri/card0\n");

	r = xioctl(DRM_IOCTL_MODE_GETRESOURCES, &res);
	if (r || res.count_connectors > MAX || res.count_crtcs > MAX || res.count_encoders > MAX ||
	    res.count_fbs > MAX) {
		printf("T6PROBE error=getresources rc=%d\n", r);
		return 2;
	}
	res.connector_id_ptr = (uintptr_t)conn_ids;
	res.crtc_id_ptr = (uintptr_t)crtc_ids;
	res.encoder_id_ptr = (uintptr_t)enc_ids;
	res.fb_id_ptr = (uintptr_t)fb_ids;
	r = xioctl(DRM_IOCTL_MODE_GETRESOURCES, &res);
	if (r) {
		printf("T6PROBE error=getresources rc=%d\n", r);
		return 2;
	}
	printf("T6PROBE resources connectors=%u crtcs=%u encoders=%u\n", res.count_connectors,
	       res.count_crtcs, res.count_encoders);
	for (i = 0; i < (int)res.count_connectors; i++) {
		r = get_connector(conn_ids[i], &conns[i]);
		if (r) {
			printf("T6PROBE error=getconnector id=%u rc=%d\n", conn_ids[i], r);
			return 2;
		}
		print_connector(&conns[i]);
		if (!use && conns[i].status == 1 && find_1080p60(&conns[i]))
			use = &conns[i];
	}
	if (!use) {
		printf("T6PROBE error=no-connected-1080p60\n");
		return 3;
	}
	mode = find_1080p60(use);
	enc.encoder_id = use->encoder;
	r = xioctl(DRM_IOCTL_MODE_GETENCODER, &enc);
	if (r) {
		printf("T6PROBE error=getencoder rc=%d\n", r);
		return 2;
	}
	for (i = 0; i < (int)res.count_crtcs; i++) {
		if (enc.possible_crtcs & (1u << i)) {
			crtc = crtc_ids[i];
			break;
		}
	}

	r = make_fb(&a);
	if (!r)
		r = make_fb(&b);
	if (r) {
		printf("T6PROBE error=framebuffer rc=%d\n", r);
		return 2;
	}
	fill_grey(&a);
	fill_bars(&b);
	printf("T6PROBE framebuffers first=%u second=%u format=NV12 pitch=%u size=%llu bars-checksum=%016llx\n",
	       a.fb_id, b.fb_id, b.pitch, (unsigned long long)b.size,
	       (unsigned long long)checksum(&b));

	set.crtc_id = crtc;
	set.fb_id = a.fb_id;
	set.set_connectors_ptr = (uintptr_t)&use->id;
	set.count_connectors = 1;
	set.mode = *mode;
	set.mode_valid = 1;
	r = xioctl(DRM_IOCTL_MODE_SETCRTC, &set);
	printf("T6PROBE modeset crtc=%u connector=%u mode=%ux%u@%u clock=%u fb=%u rc=%d\n", crtc,
	       use->id, mode->hdisplay, mode->vdisplay, mode->vrefresh, mode->clock, a.fb_id, r);
	if (r)
		return 4;

	flip.crtc_id = crtc;
	flip.fb_id = b.fb_id;
	flip.flags = DRM_MODE_PAGE_FLIP_EVENT;
	flip.user_data = 0x7606;
	/*
	 * -EBUSY while the modeset's frame is still on its way to the dock (its commit has not
	 * signalled yet): a client waits and asks again.
	 */
	for (busy = 0; (r = xioctl(DRM_IOCTL_MODE_PAGE_FLIP, &flip)) == -EBUSY && busy < 1000; busy++)
		msleep(5);
	printf("T6PROBE page-flip crtc=%u fb=%u rc=%d busy=%d\n", crtc, b.fb_id, r, busy);
	if (r)
		return 5;
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[256];
		ssize_t n;

		/* Longer than the driver's own timeouts for one flip. */
		r = poll(&p, 1, 60000);
		if (r <= 0) {
			printf("T6PROBE flip-done=timeout\n");
			return 6;
		}
		n = read(fd, buf, sizeof(buf));
		if (n >= (ssize_t)sizeof(struct drm_event_vblank)) {
			struct drm_event_vblank *ev = (struct drm_event_vblank *)buf;

			printf("T6PROBE flip-done type=%u user_data=%#llx sequence=%u crtc=%u\n",
			       ev->base.type, (unsigned long long)ev->user_data, ev->sequence,
			       ev->crtc_id);
		} else {
			printf("T6PROBE flip-done=short-read n=%zd\n", n);
			return 6;
		}
	}
	get.crtc_id = crtc;
	r = xioctl(DRM_IOCTL_MODE_GETCRTC, &get);
	printf("T6PROBE crtc id=%u fb=%u mode=%ux%u@%u active=%u rc=%d\n", crtc, get.fb_id,
	       get.mode.hdisplay, get.mode.vdisplay, get.mode.vrefresh, get.mode_valid, r);

	if (wait_unplug > 0) {
		struct conn c;

		printf("T6PROBE waiting-for-unplug connector=%u\n", use->id);
		for (tries = 0; tries < wait_unplug * 5; tries++) {
			r = get_connector(use->id, &c);
			if (!r && c.status == 2)
				break;
			msleep(200);
		}
		for (i = 0; i < (int)res.count_connectors; i++) {
			if (!get_connector(conn_ids[i], &c))
				print_connector(&c);
		}
	}
	printf("T6PROBE result=ok\n");
	return 0;
}

/*
 * dfu-status VID:PID: a C program against libusb-1.0, dynamically linked (glibc, libusb-1.0,
 * libudev), as a user's tool is. It opens the device, prints its product string, claims
 * interface 0 and asks DFU_GETSTATUS (DFU 1.1 section 6.1.2), printing the status and state.
 * Calametra runs it unmodified in the lockstep guest, whose image holds those libraries
 * (calametra-cli/tests/qemu.rs):
 *
 *   gcc -O2 -o dfu-status dfu-status.c $(pkg-config --cflags --libs libusb-1.0)
 *   calametra qemu --spec specs/dfu11-usbd-dfu.json --bin dfu-status -- 1209:0001
 *
 * Exit status: 0 the device answered and is in dfuIDLE; 1 otherwise (why, on stderr); 2 usage.
 */
#include <libusb.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    unsigned vid, pid;
    if (argc != 2 || sscanf(argv[1], "%x:%x", &vid, &pid) != 2) {
        fprintf(stderr, "usage: dfu-status VID:PID\n");
        return 2;
    }
    libusb_context *ctx = NULL;
    int rc = libusb_init(&ctx);
    if (rc != 0) {
        fprintf(stderr, "dfu-status: libusb_init: %s\n", libusb_strerror(rc));
        return 1;
    }
    libusb_device_handle *h = libusb_open_device_with_vid_pid(ctx, vid, pid);
    if (!h) {
        fprintf(stderr, "dfu-status: no device %04x:%04x\n", vid, pid);
        libusb_exit(ctx);
        return 1;
    }
    struct libusb_device_descriptor d;
    rc = libusb_get_device_descriptor(libusb_get_device(h), &d);
    if (rc != 0) {
        fprintf(stderr, "dfu-status: the device descriptor: %s\n", libusb_strerror(rc));
        return 1;
    }
    unsigned char product[128] = "";
    if (d.iProduct)
        libusb_get_string_descriptor_ascii(h, d.iProduct, product, sizeof product);
    printf("device %04x:%04x bcdDevice %04x product \"%s\"\n", d.idVendor, d.idProduct,
           d.bcdDevice, product);
    rc = libusb_claim_interface(h, 0);
    if (rc != 0) {
        fprintf(stderr, "dfu-status: claiming interface 0: %s\n", libusb_strerror(rc));
        return 1;
    }
    unsigned char s[6];
    rc = libusb_control_transfer(h, 0xa1, 3 /* DFU_GETSTATUS */, 0, 0, s, sizeof s, 1000);
    if (rc != (int)sizeof s) {
        fprintf(stderr, "dfu-status: DFU_GETSTATUS: %s\n",
                rc < 0 ? libusb_strerror(rc) : "a short answer");
        return 1;
    }
    printf("bStatus %u bwPollTimeout %u bState %u\n", s[0], s[1] | s[2] << 8 | s[3] << 16, s[4]);
    libusb_release_interface(h, 0);
    libusb_close(h);
    libusb_exit(ctx);
    if (s[4] != 2) {
        fprintf(stderr, "dfu-status: the device is in state %u, not dfuIDLE (2)\n", s[4]);
        return 1;
    }
    return 0;
}

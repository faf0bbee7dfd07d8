#!/bin/sh
# Prepares what the drivers cove server lacks need, in the background of
# `make run` (cove server --prepare-drivers): runsc for gvisor; QEMU,
# erofs-utils and the guests' kernel for microvm. COVE_PREPARE_MISSING
# names the missing drivers. A line per step goes to stdout, which the
# server logs and shows to whoever asks for the driver meanwhile; the
# tools' own output goes to stderr (the server keeps it in prepare.log).
set -eu
cd "$(dirname "$0")/.."
for driver in ${COVE_PREPARE_MISSING:-gvisor microvm}; do
	case $driver in
	gvisor)
		echo "gvisor: building gVisor's runsc into bin/ (a few minutes)"
		${MAKE:-make} --no-print-directory runsc >&2
		echo "gvisor: runsc is built" ;;
	microvm)
		need=""
		command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
		command -v mkfs.erofs >/dev/null 2>&1 || need="$need erofs-utils"
		if [ -n "$need" ]; then
			echo "microvm: installing$need from Debian's archive"
			apt-get update -qq >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >&2
		fi
		if ! ls /var/cache/cove-microvm/kernel/boot/vmlinux-* >/dev/null 2>&1; then
			echo "microvm: unpacking Debian's cloud kernel for the guests"
			./scripts/guest-kernel.sh >&2
		fi
		echo "microvm: QEMU and the guests' kernel are here" ;;
	esac
done

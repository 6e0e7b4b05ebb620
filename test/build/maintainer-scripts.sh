#!/bin/sh
# Runs the .deb's maintainer scripts (configure twice, remove, purge) against copies of /etc and
# /var/lib, inside a mount namespace of its own (`unshare --mount --propagation private`, as
# root): the scripts create and delete the real `sync-host` user and data folder, but only in
# the copies, which vanish with the namespace. Prints what each step left, one line each.
# WORK: an empty folder for the copies; ROOT: the package unpacked (dpkg-deb -x);
# CONTROL: its control scripts (dpkg-deb -e).
set -eu
cp -a /etc "$WORK/etc"
mkdir -p "$WORK/var-lib" "$WORK/etc/sync-host"
cp -a "$ROOT/etc/sync-host/auth.conf" "$WORK/etc/sync-host/auth.conf"
mount --bind "$WORK/etc" /etc
mount --bind "$WORK/var-lib" /var/lib
# no /run/systemd/system: the scripts leave systemd alone, as in a container
mount -t tmpfs tmpfs /run
# Every write below must land in the copies: stop unless /etc is the copy.
touch /etc/.maintainer-scripts-test
[ -e "$WORK/etc/.maintainer-scripts-test" ] || exit 90
"$CONTROL/postinst" configure
echo "user: $(getent passwd sync-host)"
echo "group: $(getent group sync-host)"
echo "data: $(stat -c '%U:%G %a' /var/lib/sync-host)"
echo "conf: $(stat -c '%U:%G %a' /etc/sync-host/auth.conf)"
touch /var/lib/sync-host/auth.db
"$CONTROL/postinst" configure
echo "again: $(getent passwd sync-host | cut -d: -f3) $(stat -c '%U:%G %a' /var/lib/sync-host) $(ls /var/lib/sync-host)"
"$CONTROL/prerm" remove
"$CONTROL/postrm" remove
echo "removed: $(getent passwd sync-host | cut -d: -f1) $(ls /var/lib/sync-host)"
"$CONTROL/postrm" purge
echo "purged: user=$(getent passwd sync-host | cut -d: -f1) data=$(ls /var/lib)"

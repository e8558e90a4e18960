import CTimerdSys
import Glibc
import TimerdCore

/// The machine's tz database and default zone, with zones cached after their first load.
public enum SystemTimeZones {
    /// `TZDIR` when set, else `/usr/share/zoneinfo`, read from disk.
    public static let database: TimeZoneDatabase = {
        let directory = CurrentProcess.environmentVariable("TZDIR").flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/share/zoneinfo"
        return TimeZoneDatabase(directory: directory) { path in try? FileSystem.readFile(path) }
    }()

    private static let cache = Locked<[String: ZoneRules]>([:])

    /// The zone called `name`, loaded once and then cached until `forgetLoadedZones`.
    ///
    /// Throws `bad-argument` (key `timezone`) for an unknown or malformed name.
    public static func zone(named name: String) throws(TimerdError) -> ZoneRules {
        if let cached = cache.withLock({ $0[name] }) { return cached }
        let zone = try database.zone(named: name)
        cache.withLock { $0[name] = zone }
        return zone
    }

    /// The zone for jobs that name none: `TZ`, else `/etc/localtime`, else UTC.
    public static func systemZone() -> ZoneRules {
        database.systemZone(tz: CurrentProcess.environmentVariable("TZ"), localtimeTarget: try? FileSystem.realPath("/etc/localtime"))
    }

    /// Drops cached zones, so the next lookups read the files again (after a tzdata update; on reload).
    public static func forgetLoadedZones() {
        cache.withLock { $0.removeAll() }
    }
}

/// Tells when the wall clock is set: `settimeofday`, an NTP step, or a resume from suspend. Interval
/// timers run on the monotonic clock and do not care; calendar timers must be recomputed.
public enum ClockChange {
    /// A descriptor that becomes readable when the wall clock is set; pass it to `acknowledge` then.
    ///
    /// The corresponding C function is `timerfd_create` with `TFD_TIMER_CANCEL_ON_SET`.
    public static func makeDescriptor() throws(Errno) -> FileDescriptor {
        let fd = tsys_clock_change_fd()
        guard fd >= 0 else { throw Errno.current }
        return FileDescriptor(rawValue: fd)
    }

    /// Drains and re-arms the descriptor. Returns true when the clock was set since the last call.
    public static func acknowledge(_ fd: FileDescriptor) throws(Errno) -> Bool {
        let result = tsys_clock_change_acknowledge(fd.rawValue)
        guard result >= 0 else { throw Errno.current }
        return result == 1
    }
}

import TimerdConfig
import TimerdCore
import TimerdSystem

/// What timerd and timerctl read off this host to schedule jobs: config files, the time zones of
/// calendar jobs, the machine id. One implementation, so `timerctl simulate` and `timerctl next` see
/// what the daemon would.
package enum HostConfig {
    /// Reads the config; a missing default config is an empty one, a missing explicit one an error.
    package static func load(path: String, explicit: Bool) -> Result<Configuration, ConfigErrors> {
        if !explicit, !FileSystem.fileExists(path) { return .success(.empty) }
        return ConfigLoader.loadResult(path: path, fileSystem: DiskConfigFileSystem())
    }

    /// The job's schedule resolved in its zone (the job's `timezone`, else the system zone), or nil for
    /// schedules that are not cron or calendar. Throws `bad-argument` for an unknown zone.
    package static func civilSchedule(for spec: JobSpec) throws(TimerdError) -> CivilSchedule? {
        let pattern: CivilSchedule.Pattern
        switch spec.schedule {
        case .cron(let expression):
            if expression.isReboot { return nil }
            pattern = .cron(expression)
        case .calendar(let calendar): pattern = .calendar(calendar)
        default: return nil
        }
        let zone = try spec.timezone.map { name throws(TimerdError) in try SystemTimeZones.zone(named: name) }
            ?? SystemTimeZones.systemZone()
        return CivilSchedule(pattern: pattern, zone: zone, gap: spec.dstGap, repeat: spec.dstRepeat)
    }

    /// `/etc/machine-id`, the seed of fixed jitter (as for systemd's `FixedRandomDelay=`); the host name
    /// when it is missing.
    package static let machineID: String = {
        if let bytes = try? FileSystem.readFile("/etc/machine-id") {
            let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
            if !text.isEmpty { return text }
        }
        return (try? CurrentProcess.hostname()) ?? "localhost"
    }()
}

/// The real file system, for the config loader.
package struct DiskConfigFileSystem: ConfigFileSystem {
    package init() {}

    package func read(_ path: String) throws(ConfigReadError) -> [UInt8] {
        do {
            return try FileSystem.readFile(path)
        } catch {
            throw ConfigReadError(reason: "\(error)", isNotFound: error == .noSuchFileOrDirectory)
        }
    }

    package func glob(_ pattern: String) -> [String] {
        (try? FileSystem.glob(pattern)) ?? []
    }

    package func accountExists(_ name: String, group: Bool) -> Bool {
        // A failing account database counts as "exists": the run reports it, the config stays loadable.
        do {
            return group ? try GroupAccount.lookup(name: name) != nil : try UserAccount.lookup(name: name) != nil
        } catch {
            return true
        }
    }
}

import Dispatch
import Synchronization
import TimerdConfig
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// The real file system, for the config loader.
struct DiskConfigFileSystem: ConfigFileSystem {
    func read(_ path: String) throws(ConfigReadError) -> [UInt8] {
        do {
            return try FileSystem.readFile(path)
        } catch {
            throw ConfigReadError(reason: "\(error)", isNotFound: error == .noSuchFileOrDirectory)
        }
    }

    func glob(_ pattern: String) -> [String] {
        (try? FileSystem.glob(pattern)) ?? []
    }
}

/// The running service: wires the registry, the command launcher and the control server together, and
/// owns start-up, reload and shutdown.
public final class Daemon: Sendable {
    private let log: Logger
    private let sink: StderrLogSink
    private let registry: Registry
    private let configPath: String?
    private let configPathExplicit: Bool
    private let settings: Mutex<DaemonSettings>
    private let server: Mutex<ControlServer?> = Mutex(nil)
    private let stopping = Atomic<Bool>(false)

    /// `timerd`'s entry point: parses `arguments` (without the program name), then runs until stopped.
    public static func main(arguments: [String]) -> Never {
        let options: DaemonOptions
        do {
            options = try DaemonOptions.parse(arguments)
        } catch {
            CurrentProcess.writeToStderr("timerd: error: \(error.message)\nSee 'timerd --help'.\n")
            CurrentProcess.exit(2)
        }
        if options.showHelp {
            print(DaemonOptions.usage)
            CurrentProcess.exit(0)
        }
        if options.showVersion {
            print("timerd \(ControlHandler.version) (protocol \(ControlHandler.protocolVersion))")
            CurrentProcess.exit(0)
        }

        let configPath = options.config ?? DaemonOptions.defaultConfig
        let configuration: Configuration
        switch loadConfig(path: configPath, explicit: options.config != nil) {
        case .success(let loaded):
            configuration = loaded
        case .failure(let errors):
            for diagnostic in errors.diagnostics { CurrentProcess.writeToStderr("\(diagnostic)\n") }
            if !options.checkConfig { CurrentProcess.writeToStderr("timerd: the config is invalid; not starting\n") }
            CurrentProcess.exit(1)
        }
        if options.checkConfig {
            let files = configuration.files.isEmpty ? "no config file (\(configPath) is missing)" : configuration.files.joined(separator: ", ")
            print("config OK: \(configuration.jobs.count) job(s) in \(files)")
            CurrentProcess.exit(0)
        }

        let socket = options.socket
            ?? CurrentProcess.environmentVariable("TIMERD_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
            ?? configuration.settings.socket
            ?? DaemonOptions.defaultSocket()
        // Before any other thread exists: every thread inherits the block, so SIGTERM, SIGINT and SIGHUP stay
        // pending until the main thread takes them with sigwait, and none can be lost. (With Dispatch signal
        // sources under dispatchMain(), whose main thread waits in sigsuspend with every signal unblocked,
        // a SIGTERM sent soon after start-up was seen to vanish.)
        let handled: [Signal] = [.term, .int, .hup]
        do {
            try Signals.ignore(.pipe)
            try Signals.block(handled)
        } catch {
            CurrentProcess.writeToStderr("timerd: cannot set up signal handling: \(error)\n")
            CurrentProcess.exit(1)
        }
        let daemon = Daemon(configPath: configPath, explicit: options.config != nil, configuration: configuration)
        Task { await daemon.start(socket: socket, configuration: configuration) }
        while true {
            do {
                daemon.received(try Signals.waitForAny(handled))
            } catch {
                // sigwait fails only for an invalid signal set: a bug, not an environment failure.
                preconditionFailure("sigwait failed: \(error)")
            }
        }
    }

    /// Handles a signal taken by the main thread (never blocks it).
    private func received(_ signal: Signal) {
        if signal == .hup {
            Task { _ = try? await self.reload(trigger: "SIGHUP") }
        } else {
            Task { await self.stop(signal: signal) }
        }
    }

    private init(configPath: String, explicit: Bool, configuration: Configuration) {
        sink = StderrLogSink(journal: CurrentProcess.environmentVariable("JOURNAL_STREAM") != nil)
        log = Logger(sink: sink, minimum: CurrentProcess.environmentVariable("TIMERD_DEBUG") == nil ? .info : .debug)
        self.configPath = configPath
        configPathExplicit = explicit
        settings = Mutex(configuration.settings)
        registry = Registry(
            launcher: CommandLauncher(log: log), log: log, maxRunning: configuration.settings.maxRunning,
            baseEnvironment: Self.baseEnvironment())
    }

    /// Reads the config; a missing default config is an empty one, a missing explicit one an error.
    static func loadConfig(path: String, explicit: Bool) -> Result<Configuration, ConfigErrors> {
        if !explicit, !FileSystem.fileExists(path) { return .success(.empty) }
        return ConfigLoader.loadResult(path: path, fileSystem: DiskConfigFileSystem())
    }

    /// The environment every run starts from: a fixed `PATH` and a few variables from the daemon's own
    /// environment, nothing else (like systemd services, unlike a login shell).
    static func baseEnvironment() -> [KeyValue] {
        var list = [
            KeyValue("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
            KeyValue("SHELL", "/bin/sh"),
            KeyValue("HOME", CurrentProcess.environmentVariable("HOME") ?? "/"),
        ]
        for name in ["LANG", "LC_ALL", "TZ", "USER", "LOGNAME"] {
            if let value = CurrentProcess.environmentVariable(name) { list.append(KeyValue(name, value)) }
        }
        return list
    }

    // MARK: - Start

    private func start(socket: String, configuration: Configuration) async {

        do {
            _ = try await registry.applyConfig(declared(configuration), maxRunning: configuration.settings.maxRunning)
        } catch {
            fail("cannot load the config jobs: \(error.message)")
        }

        let handler = ControlHandler(registry: registry, reload: { [self] () async throws(TimerdError) -> ReloadSummary in
            try await self.reload(trigger: "RELOAD")
        })
        let server: ControlServer
        do {
            server = try ControlServer(path: socket, handler: handler, log: log)
        } catch {
            fail("cannot listen on \(socket): \(error)")
        }
        do {
            try await server.start()
        } catch {
            fail("cannot watch the control socket: \(error)")
        }
        self.server.withLock { $0 = server }

        let counts = await registry.counts()
        let files = configuration.files.isEmpty ? "no config file" : "config \(configuration.files[0])"
        log.notice("timerd \(ControlHandler.version) ready: \(counts.jobs) job(s) from \(files); listening on \(socket) (pid \(CurrentProcess.id))")
        Notifier.ready(status: "\(counts.jobs) jobs")
    }

    private func fail(_ message: String) -> Never {
        log.error(message)
        sink.flush()
        CurrentProcess.exit(1)
    }

    private func declared(_ configuration: Configuration) -> [DeclaredJob] {
        configuration.jobs.map { DeclaredJob(spec: $0.spec, file: $0.file, line: $0.line) }
    }

    // MARK: - Reload

    /// Re-reads the config files and applies the difference; an invalid config changes nothing.
    func reload(trigger: String) async throws(TimerdError) -> ReloadSummary {
        guard let configPath else { return ReloadSummary() }
        log.info("reloading the config (\(trigger))")
        let configuration: Configuration
        switch Self.loadConfig(path: configPath, explicit: configPathExplicit) {
        case .success(let loaded):
            configuration = loaded
        case .failure(let errors):
            for diagnostic in errors.diagnostics { log.error("reload rejected: \(diagnostic)") }
            throw errors.timerdError
        }
        let old = settings.withLock { current in
            defer { current.maxRunning = configuration.settings.maxRunning; current.stopGrace = configuration.settings.stopGrace }
            return current
        }
        if old.socket != configuration.settings.socket {
            log.warning("the [daemon] socket setting changed; it takes effect when timerd restarts")
        }
        do {
            let summary = try await registry.applyConfig(declared(configuration), maxRunning: configuration.settings.maxRunning)
            log.notice("config reloaded: \(summary.added.count) added, \(summary.changed.count) changed, \(summary.removed.count) removed, \(summary.unchanged) unchanged")
            return summary
        } catch {
            log.error("reload rejected: \(error.message)")
            throw error
        }
    }

    // MARK: - Stop

    private func stop(signal: Signal) async {
        guard !stopping.exchange(true, ordering: .relaxed) else {
            log.notice("\(signal) again: already stopping")
            return
        }
        log.notice("\(signal) received: stopping")
        Notifier.stopping(status: "stopping")
        let server = self.server.withLock { $0 }
        await server?.stopAccepting()
        await registry.shutdown(grace: settings.withLock { $0.stopGrace })
        await server?.closeAll()
        log.notice("stopped")
        sink.flush()
        CurrentProcess.exit(0)
    }
}

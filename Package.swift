// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "timerd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "timerd", targets: ["timerd"]),
        .executable(name: "timerctl", targets: ["timerctl"]),
    ],
    targets: [
        // Pure model: job specs, durations, schedules and next-fire math, the error vocabulary. No I/O.
        .target(name: "TimerdCore"),
        // The scheduling engine: every decision about when jobs fire and what becomes of each fire, as
        // inputs in and effects out. No I/O, no clock reads (docs/architecture.md).
        .target(name: "TimerdEngine", dependencies: ["TimerdCore"]),
        // The line protocol: framing, quoting, requests and replies. Shared by daemon and client.
        .target(name: "TimerdProtocol", dependencies: ["TimerdCore"]),
        // Config files -> job specs and daemon settings, with file:line diagnostics. Never logs.
        .target(name: "TimerdConfig", dependencies: ["TimerdCore", "TimerdProtocol"]),
        // GNU-only and fork/exec-sensitive calls Swift cannot make safely.
        .target(name: "CTimerdSys"),
        // Typed wrappers over Glibc: descriptors, Unix sockets, spawn, signals.
        .target(name: "TimerdSystem", dependencies: ["TimerdCore", "CTimerdSys"]),
        // libsystemd (headers from Debian's libsystemd-dev), loaded with dlopen only under systemd.
        .target(name: "CTimerdSystemd"),
        // SQLite, for the durable state store.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // Durable state: runtime jobs, fire bookkeeping and run history in <state dir>/state.db.
        .target(name: "TimerdStore", dependencies: ["TimerdCore", "TimerdProtocol", "TimerdSystem", "CSQLite"]),
        // libcurl (headers from Debian's libcurl4-openssl-dev), loaded with dlopen on first use; typed
        // wrappers for its variadic calls. Only TimerdHTTP imports it.
        .target(name: "CTimerdCurl"),
        // The one HTTP transport over libcurl, for webhooks and the etcd client: requests, responses, error
        // kinds; blocking exchanges with a handle pool, streams, and a multi-handle session on a queue.
        .target(name: "TimerdHTTP", dependencies: ["CTimerdCurl", "TimerdSystem"]),
        // etcd client: blocking calls to etcd's v3 JSON gateway over TimerdHTTP, with endpoint failover and watches.
        .target(name: "TimerdCluster", dependencies: ["TimerdHTTP", "TimerdSystem", "TimerdProtocol"]),
        // What timerd and timerctl read off the host to schedule jobs: config files, zones, the machine id.
        .target(name: "TimerdHost", dependencies: ["TimerdConfig", "TimerdCore", "TimerdSystem"]),
        // The running service: registry, timers, control server, command runner.
        .target(
            name: "TimerdDaemon",
            dependencies: ["TimerdCore", "TimerdEngine", "TimerdHost", "TimerdProtocol", "TimerdConfig", "TimerdSystem", "TimerdStore", "CTimerdSystemd", "TimerdHTTP", "TimerdCluster"],
            // A nonisolated async function runs on its caller's actor (each component's own serial
            // queue), never on the global concurrent executor (docs/architecture.md, Concurrency).
            swiftSettings: [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]
        ),
        // timerctl: verbs, flags, output, exit codes.
        .target(name: "TimerdCLI", dependencies: ["TimerdCore", "TimerdEngine", "TimerdHost", "TimerdConfig", "TimerdProtocol", "TimerdSystem"]),
        .executableTarget(name: "timerd", dependencies: ["TimerdDaemon"]),
        .executableTarget(name: "timerctl", dependencies: ["TimerdCLI"]),
        // The benchmark driver behind `make bench` (bench/run.sh); not installed.
        .executableTarget(name: "timerd-bench", dependencies: ["TimerdProtocol", "TimerdSystem", "TimerdCluster"]),
        // For the tests only: where they find timerd, timerctl (TIMERD_TEST_BIN_DIR, see the Makefile's test
        // target) and timerd-test-helper.
        .target(name: "TimerdTestSupport", path: "Tests/TestSupport"),
        // For the tests only: does in a process of its own what a test must not do in the test process, where
        // every test runs at once (signal dispositions, TZ, resource limits). Not installed.
        .executableTarget(name: "timerd-test-helper", dependencies: ["TimerdSystem"], path: "Tests/TestHelper"),
        .testTarget(name: "TimerdCoreTests", dependencies: ["TimerdCore", "TimerdTestSupport"], exclude: ["cron_oracle.py"]),
        .testTarget(name: "TimerdEngineTests", dependencies: ["TimerdEngine"]),
        .testTarget(name: "TimerdProtocolTests", dependencies: ["TimerdProtocol"]),
        .testTarget(name: "TimerdConfigTests", dependencies: ["TimerdConfig"]),
        .testTarget(name: "TimerdSystemTests", dependencies: ["TimerdSystem", "TimerdTestSupport"]),
        .testTarget(name: "TimerdCLITests", dependencies: ["TimerdCLI", "TimerdTestSupport"]),
        .testTarget(name: "TimerdDaemonTests", dependencies: ["TimerdDaemon", "TimerdEngine", "TimerdConfig", "TimerdStore"]),
        .testTarget(name: "TimerdStoreTests", dependencies: ["TimerdStore"]),
        .testTarget(name: "TimerdClusterTests", dependencies: ["TimerdCluster"]),
        .testTarget(name: "IntegrationTests", dependencies: ["TimerdCore", "TimerdProtocol", "TimerdSystem", "TimerdStore", "TimerdCluster", "TimerdHTTP", "TimerdTestSupport"], exclude: ["webhook_server.py"]),
        .testTarget(name: "SystemdTests", dependencies: ["TimerdTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

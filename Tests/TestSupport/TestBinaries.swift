import Foundation

/// Where the tests find the programs they start.
///
/// `timerd` and `timerctl` come from `$TIMERD_TEST_BIN_DIR` when it is set: `make test` sets it to
/// `.build/release`, so the end-to-end tests run the release binaries `make build` produces (what users get).
/// Without it they come from the directory of the running test bundle, i.e. the build the tests were built
/// in: the debug build under plain `swift test`, the instrumented one under `make test-tsan`/`test-asan`
/// (which unset the variable). `timerd-test-helper` is always the one built with the tests.
public enum TestBinaries {
    /// The environment variable naming the directory of `timerd` and `timerctl`.
    public static let variable = "TIMERD_TEST_BIN_DIR"

    /// The directory of the running test bundle (`.build/<triple>/<configuration>`).
    public static let bundleDirectory: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (exe as NSString).deletingLastPathComponent
    }()

    /// The value of `TIMERD_TEST_BIN_DIR` made absolute, or nil when it is unset or empty.
    public static let configuredDirectory: String? = {
        guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else { return nil }
        return value.hasPrefix("/") ? value : FileManager.default.currentDirectoryPath + "/" + value
    }()

    /// The directory `timerd` and `timerctl` are started from.
    public static var productDirectory: String { configuredDirectory ?? bundleDirectory }

    /// Where that directory came from, for messages.
    public static var productDirectorySource: String {
        configuredDirectory == nil ? "the test bundle's directory (\(variable) is not set)" : "\(variable)"
    }

    /// The path of `timerd` or `timerctl` in `productDirectory`. Throws, naming the directory and where it
    /// came from, when there is no executable file of that name: a missing release binary must fail the
    /// test, not quietly run another build's.
    public static func product(_ name: String) throws -> String {
        try executable(name, in: productDirectory, from: productDirectorySource)
    }

    /// The path of `timerd-test-helper`, built with the tests (never from `TIMERD_TEST_BIN_DIR`).
    public static func helper() throws -> String {
        try executable("timerd-test-helper", in: bundleDirectory, from: "the test bundle's directory")
    }

    /// `directory/name` if that is an executable file; otherwise throws a `MissingBinary` saying so.
    public static func executable(_ name: String, in directory: String, from source: String) throws -> String {
        let path = directory + "/" + name
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              FileManager.default.isExecutableFile(atPath: path) else {
            throw MissingBinary(path: path, source: source)
        }
        return path
    }
}

/// A program a test needs is not where it should be.
public struct MissingBinary: Error, CustomStringConvertible {
    public let path: String
    public let source: String

    public var description: String {
        "\(path) is missing or not executable (directory from \(source)); "
            + "`make build` builds the release binaries in .build/release, `swift build --build-tests` the debug ones"
    }
}

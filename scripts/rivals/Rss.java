import java.nio.file.Files;
import java.nio.file.Path;

/** The JVM's peak resident memory, for EsperBench and FlinkBench (compiled with each). */
final class Rss {
    private Rss() {
    }

    static long peakKiB() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (Exception ignored) {
        }
        return -1;
    }
}

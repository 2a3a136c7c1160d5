// A Kafka consumer-group member written with the Apache Kafka Java client
// (KafkaConsumer, group.protocol=consumer), driven over stdin / stdout by
// tests/peers/__init__.py. It speaks the same line protocol as
// tests/peers/python_peer.py; that module's docstring describes it.
//
// Usage: java -cp '<classes>:<kafka libs>/*' Peer BOOTSTRAP GROUP [key=value ...]
//
// Everything the program or its libraries would print goes to stderr: stdout
// carries protocol lines only.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

public final class Peer {
    private static final String EOF = "\u0000eof";

    private final PrintStream out;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
    private final Set<TopicPartition> held = new HashSet<>();
    // Records still to hand out before pausing; negative: no limit.
    private long budget = -1;
    private long handedSinceConsume = 0;
    private boolean subscribed = false;

    private Peer(PrintStream out, Properties props) {
        this.out = out;
        this.consumer = new KafkaConsumer<>(props);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length < 2) {
            System.err.println("usage: Peer BOOTSTRAP GROUP [key=value ...]");
            Runtime.getRuntime().halt(2);
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("group.protocol", "consumer");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Peer peer = new Peer(out, props);
        try {
            peer.run();
        } catch (Throwable t) {
            peer.emit("error " + t.getClass().getSimpleName() + " " + oneLine(t.getMessage()));
            t.printStackTrace();
            out.flush();
            Runtime.getRuntime().halt(3);
        }
    }

    private static String oneLine(String s) {
        return s == null ? "-" : s.replace('\n', ' ').replace('\r', ' ');
    }

    private void emit(String line) {
        out.print(System.nanoTime() + " " + line + "\n");
        out.flush();
    }

    private int epoch() {
        try {
            return consumer.groupMetadata().generationId();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    private static String partitions(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) {
            return "-";
        }
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        StringBuilder sb = new StringBuilder();
        for (int p : sorted) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(p);
        }
        return sb.toString();
    }

    private void startReader() {
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    commands.add(line.trim());
                }
            } catch (Exception e) {
                // treated as end of input
            }
            commands.add(EOF);
        }, "stdin-reader");
        reader.setDaemon(true);
        reader.start();
    }

    private void run() throws InterruptedException {
        startReader();
        emit("ready java " + ProcessHandle.current().pid());
        while (true) {
            String command = subscribed ? commands.poll() : commands.poll(100, TimeUnit.MILLISECONDS);
            if (command != null && !command.isEmpty() && !handle(command)) {
                return;
            }
            if (subscribed) {
                pollOnce();
            }
        }
    }

    /** Runs one command; false when the program should end. */
    private boolean handle(String command) {
        String[] words = command.split(" ");
        switch (words[0]) {
            case "subscribe":
                consumer.subscribe(List.of(words[1]), new Listener());
                subscribed = true;
                emit("ok subscribe");
                return true;
            case "consume":
                budget = Long.parseLong(words[1]);
                handedSinceConsume = 0;
                applyBudget();
                emit("ok consume " + budget);
                return true;
            case "commit":
                commit();
                return true;
            case "epoch":
                emit("epoch " + epoch());
                return true;
            case "crash":
                out.flush();
                Runtime.getRuntime().halt(1);
                return false;
            case "close":
            case EOF:
                consumer.close(Duration.ofSeconds(30));
                emit("closed");
                return false;
            default:
                emit("error BadCommand " + command);
                return true;
        }
    }

    private void commit() {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        }
        consumer.commitSync(offsets);
        emit("committed " + offsetsText(offsets));
    }

    private static String offsetsText(Map<TopicPartition, OffsetAndMetadata> offsets) {
        if (offsets.isEmpty()) {
            return "-";
        }
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(e.getKey().partition()).append(':').append(e.getValue().offset());
        }
        return sb.toString();
    }

    private void applyBudget() {
        if (budget == 0) {
            consumer.pause(consumer.assignment());
        } else {
            consumer.resume(consumer.paused());
        }
    }

    private void pollOnce() {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
        if (records.isEmpty()) {
            return;
        }
        long before = budget;
        StringBuilder sb = new StringBuilder();
        Map<TopicPartition, Long> rewind = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            TopicPartition tp = new TopicPartition(record.topic(), record.partition());
            if (budget == 0 || rewind.containsKey(tp)) {
                // over the budget: give the record back, to be read again after `consume`
                rewind.putIfAbsent(tp, record.offset());
                continue;
            }
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(record.partition()).append(':').append(record.offset());
            handedSinceConsume++;
            if (budget > 0) {
                budget--;
            }
        }
        for (Map.Entry<TopicPartition, Long> e : rewind.entrySet()) {
            consumer.seek(e.getKey(), e.getValue());
        }
        if (sb.length() > 0) {
            emit("recs " + sb);
        }
        if (before > 0 && budget == 0) {
            applyBudget();
            emit("consumed " + handedSinceConsume);
        }
    }

    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            held.removeAll(partitions);
            emit("revoked " + epoch() + " " + partitions(partitions));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            held.addAll(partitions);
            if (budget == 0) {
                consumer.pause(partitions);
            }
            emit("assigned " + epoch() + " " + partitions(partitions));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            held.removeAll(partitions);
            emit("lost " + epoch() + " " + partitions(partitions));
        }
    }
}

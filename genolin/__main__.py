from genolin.cli import main

if __name__ == "__main__":  # also keeps spawned child processes (bigWig writers) from running the CLI
    main()

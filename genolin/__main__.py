from genolin.cli import main

main()

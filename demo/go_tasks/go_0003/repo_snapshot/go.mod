module example.com/numkit

go 1.19
